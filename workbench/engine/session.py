"""Sessions: the user's whole piece of work on one model and one target, as an ordered,
replayable log of actions. It is the single source of truth: everything else (layouts,
kernels, schedules) is derived by replaying it. The file format is documented in
``docs/session-format.md``.

Actions:
- ``{"kind": "layout", "tensor": KEY, "primitive": NAME, "args": {...}}`` (or ``"preset"``
  instead of ``"primitive"``, with ``"params"``): a layout primitive on a tensor or input view;
- ``{"kind": "loop", "op": KERNEL, "primitive": NAME, "args": {...}}``: a loop primitive on a
  kernel (named after the op that heads it);
- ``{"kind": "tuned", "op": KERNEL, "layouts": [layout actions], "trace": TRACE_JSON,
  "latency_ms": float}``: an applied tuning result; its layouts replace those of the same
  tensors and its trace replaces the kernel's loop steps, so replay needs no tuning.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from . import zoo
from .errors import SessionError, WorkbenchError
from .graph import Graph
from .layout import LayoutBook
from .layouts import apply_layout, key_base, preset_actions
from .program import DEFAULT_TARGET, Program, make_program

__all__ = ["FORMAT", "VERSION", "Session", "State", "replay", "load", "save", "loads", "dumps", "new_session",
           "safe_path"]

FORMAT = "alt-workbench-session"
VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
_FIELDS = {
    "layout": ({"kind", "tensor", "args"}, {"primitive", "preset", "params"}),
    "loop": ({"kind", "op", "primitive", "args"}, set()),
    "tuned": ({"kind", "op", "trace"}, {"layouts", "latency_ms", "stage", "measurements"}),
}


@dataclass(frozen=True)
class Session:
    name: str
    target: dict = field(default_factory=lambda: dict(DEFAULT_TARGET))
    model: dict = field(default_factory=lambda: {"zoo": zoo.DEFAULT_MODEL})
    actions: tuple[dict, ...] = ()
    redo_stack: tuple[dict, ...] = ()

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "name": self.name, "target": self.target,
                "model": self.model, "actions": [dict(a) for a in self.actions]}

    def key(self) -> str:
        """A content hash: caches keyed on it rebuild only what changed."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]

    def push(self, action: Mapping) -> "Session":
        """Append an action after checking it replays; refused actions change nothing."""
        action = _check_action(dict(action), len(self.actions))
        new = replace(self, actions=self.actions + (action,), redo_stack=())
        replay(new)
        return new

    def undo(self) -> "Session":
        if not self.actions:
            raise SessionError("nothing to undo")
        return replace(self, actions=self.actions[:-1], redo_stack=(self.actions[-1],) + self.redo_stack)

    def redo(self) -> "Session":
        if not self.redo_stack:
            raise SessionError("nothing to redo")
        return replace(self, actions=self.actions + self.redo_stack[:1], redo_stack=self.redo_stack[1:])


def new_session(model: str = zoo.DEFAULT_MODEL, name: str | None = None, target: dict | None = None,
                **options: Any) -> Session:
    zoo.load(model, **options)  # refuse unknown models now
    return Session(name or model, dict(target or DEFAULT_TARGET), {"zoo": model, **options})


@dataclass
class State:
    """What a session's actions amount to: layouts, per-kernel loop steps or tuned traces."""

    session: Session
    graph: Graph
    book: LayoutBook = field(default_factory=LayoutBook)
    steps: dict[str, list] = field(default_factory=dict)  # kernel -> [LoopStep]
    traces: dict[str, Any] = field(default_factory=dict)  # kernel -> tuned trace JSON
    _funcs: dict[str, Any] = field(default_factory=dict, repr=False)  # kernel -> scheduled PrimFunc

    @staticmethod
    def of(session: Session) -> "State":
        model = dict(session.model)
        name = model.pop("zoo", None)
        if not isinstance(name, str):
            raise SessionError('field "model": needs {"zoo": NAME}')
        try:
            graph = zoo.load(name, **model)
        except WorkbenchError as e:
            raise SessionError(f'field "model": {e}') from None
        return State(session, graph)

    def apply(self, action: dict, index: int) -> "State":
        """Apply one action in place; errors name the action index and field."""
        where = f"action {index} ({action.get('kind')}"
        try:
            if action["kind"] == "layout":
                self.book = _layout(self.graph, self.book, action)
                self.__dict__.pop("program", None)
                self._funcs.clear()
            elif action["kind"] == "loop":
                from .loops import LoopStep

                k = self._kernel(action["op"])
                self.steps[k] = self.steps.get(k, []) + [LoopStep.make(action["primitive"], **action["args"])]
                self.traces.pop(k, None)
                self._funcs.pop(k, None)
                self.scheduled(k)
            else:
                for lay in action.get("layouts", []):
                    self.book = _layout(self.graph, self.book, lay, fresh=True)
                self.__dict__.pop("program", None)
                self._funcs.clear()
                k = self._kernel(action["op"])
                self.traces[k], self.steps[k] = action["trace"], []
                self._funcs.pop(k, None)
                self.scheduled(k)
        except WorkbenchError as e:
            field_ = "tensor" if action["kind"] == "layout" else "op"
            raise SessionError(f"{where} on {action.get(field_)!r}): {e}") from None
        return self

    def _kernel(self, op: str) -> str:
        names = [k.name for k in self.program.plan.kernels]
        if op not in names:
            raise SessionError(f"no kernel {op!r} under the current layouts; kernels: {', '.join(names)}")
        return op

    @cached_property
    def program(self) -> Program:
        """The unscheduled program under the current layouts."""
        return make_program(self.graph, self.book)

    def scheduled(self, kernel: str):
        """The kernel's PrimFunc after its loop steps or tuned trace (kept until an action changes
        the kernel: pages and replay ask for it many times)."""
        from .loops import apply_steps, apply_trace_json

        if kernel not in self._funcs:
            func = self.program.funcs[kernel]
            if kernel in self.traces:
                func = apply_trace_json(func, self.traces[kernel]).mod["main"]
            elif self.steps.get(kernel):
                func = apply_steps(func, self.steps[kernel]).mod["main"]
            self._funcs[kernel] = func
        return self._funcs[kernel]

    def scheduled_program(self) -> Program:
        return self.program.with_funcs({k: self.scheduled(k) for k in set(self.steps) | set(self.traces)
                                        if k in self.program.funcs})


def _layout(graph: Graph, book: LayoutBook, action: dict, fresh: bool = False) -> LayoutBook:
    key = action["tensor"]
    if "preset" in action:
        acts = preset_actions(graph, action["preset"], key, **action.get("params", {}))
    else:
        acts = [(key, action["primitive"], action["args"])]
    if fresh:  # a tuned result replaces the layouts of the keys it sets
        for k in dict.fromkeys(k for k, _, _ in acts):
            book = book.with_layout(k, key_base(graph, k))
    for k, prim, args in acts:
        book = apply_layout(graph, book, k, prim, args)
    return book


def replay(session: Session) -> State:
    """Rebuild the state from scratch (raises SessionError naming the first bad action)."""
    state = State.of(session)
    for i, a in enumerate(session.actions):
        state.apply(a, i)
    return state


########## File format ##########

def _check_action(a: Any, index: int) -> dict:
    if not isinstance(a, dict):
        raise SessionError(f"action {index}: must be an object, got {type(a).__name__}")
    kind = a.get("kind")
    if kind not in _FIELDS:
        raise SessionError(f'action {index}: field "kind" must be one of {sorted(_FIELDS)}, got {kind!r}')
    need, optional = _FIELDS[kind]
    if kind == "layout" and "preset" in a:
        need = need - {"args"} | {"preset"}
    elif kind == "layout":
        need = need | {"primitive"}
    missing = sorted(need - set(a))
    if missing:
        raise SessionError(f'action {index} ({kind}): missing field "{missing[0]}"')
    extra = sorted(set(a) - need - optional)
    if extra:
        raise SessionError(f'action {index} ({kind}): unknown field "{extra[0]}"')
    for f in ("tensor", "op", "primitive", "preset"):
        if f in a and not isinstance(a[f], str):
            raise SessionError(f'action {index} ({kind}): field "{f}" must be a string')
    for f in ("args", "params"):
        if f in a and not isinstance(a[f], dict):
            raise SessionError(f'action {index} ({kind}): field "{f}" must be an object')
    return a


def loads(text: str) -> Session:
    """Parse and validate a session file (structure, then a full replay)."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise SessionError(f"not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise SessionError("a session file is a JSON object")
    if d.get("format") != FORMAT:
        raise SessionError(f'field "format" must be "{FORMAT}", got {d.get("format")!r}')
    if d.get("version") != VERSION:
        raise SessionError(f'field "version": unsupported version {d.get("version")!r} (this workbench reads {VERSION})')
    for f, typ in (("name", str), ("target", dict), ("model", dict), ("actions", list)):
        if not isinstance(d.get(f), typ):
            raise SessionError(f'field "{f}" must be a {typ.__name__}, got {type(d.get(f)).__name__}')
    if not _NAME.match(d["name"]):
        raise SessionError(f'field "name": {d["name"]!r} is not a valid session name (letters, digits, _ . -)')
    if "kind" not in d["target"]:
        raise SessionError('field "target": needs a "kind" (e.g. {"kind": "llvm", "num-cores": 2})')
    actions = tuple(_check_action(a, i) for i, a in enumerate(d["actions"]))
    session = Session(d["name"], d["target"], d["model"], actions)
    replay(session)
    return session


def dumps(session: Session) -> str:
    return json.dumps(session.to_json(), indent=1) + "\n"


def load(path: str | os.PathLike) -> Session:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SessionError(f"cannot read session {path}: {e.strerror}") from None
    return loads(text)


def safe_path(folder: str | os.PathLike, name: str) -> Path:
    """``folder/name.json``, refusing names that could escape the folder."""
    if not _NAME.match(name) or ".." in name:
        raise SessionError(f"invalid session name {name!r}: use letters, digits, _ . - (no path parts)")
    return Path(folder) / f"{name}.json"


def save(session: Session, path: str | os.PathLike) -> Path:
    """Write atomically: a temporary file in the same folder, then a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(dumps(session))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
