"""Sessions: the user's whole piece of work on one model and one target, as an ordered,
replayable log of steps (``workbench.engine.base.step.Step``), the single source of truth:
layouts, kernels and schedules are derived by replaying it into a ``State`` (format:
``docs/session-format.md``). Steps:

- ``layout`` / ``preset``: a layout primitive (or a preset of them) on a tensor or input view;
- ``loop``: a loop primitive on a kernel (named after the op that heads it);
- ``tuned``: an applied tuning result; its layouts replace those of the same tensors and its
  trace replaces the kernel's loop steps, so replay needs no tuning.

Every other kernel's schedule is ``policy``'s; a saved session pins it (``Session.pins``), so a
replay after a heuristic change builds the same kernels (version 1 files, without pins, are
pinned at their next save). A ``State`` is a value: ``state.push(step)`` returns a new state
(one step applied on the kernel's current schedule), and ``replay(session)`` applies each step once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import tvm_ffi

from ..models import zoo
from ..base.errors import LoopError, SessionError, WorkbenchError
from ..base.files import write_atomic
from ..ir.graph import Graph
from ..layout.book import LayoutBook
from ..layout.keys import apply_layout, key_base
from ..layout.presets import preset_actions
from ..loops.primitives import apply_step
from ..schedules.policy import KernelSchedule, Pin, choose, expert_schedule, fingerprint
from ..build.program import Program, make_program
from ..build.targets import DEFAULT_TARGET
from ..base.step import Step

__all__ = ["FORMAT", "VERSION", "READS", "Session", "State", "KernelSchedule", "replay", "load", "load_state", "save",
           "loads", "loads_state", "dumps", "parse", "check_target", "new_session", "safe_path", "list_sessions",
           "write_atomic"]

FORMAT = "alt-workbench-session"
VERSION = 2
#: the versions read: 1 has no pins (migrated on read: its kernels are pinned at its next save)
READS = (1, 2)
MAX_SESSION_MB = 5  # a larger file is refused; .streamlit/config.toml's maxUploadSize matches (MiB, as Streamlit)
_CPU = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


@dataclass(frozen=True)
class Session:
    """The model, the target and the steps (with the steps undone, for redo), and the schedules
    the policy gave the kernels the steps leave unscheduled, pinned when it was saved."""

    name: str
    target: dict = field(default_factory=lambda: dict(DEFAULT_TARGET))
    model: dict = field(default_factory=lambda: {"zoo": zoo.DEFAULT_MODEL})
    steps: tuple[Step, ...] = ()
    redo_stack: tuple[Step, ...] = ()
    pins: tuple[Pin, ...] = ()

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "name": self.name, "target": self.target,
                "model": self.model, "actions": [s.to_json() for s in self.steps],
                "pinned": [p.to_json() for p in self.pins]}

    def pin(self, kernel: str) -> Pin | None:
        return next((p for p in self.pins if p.kernel == kernel), None)

    def key(self) -> str:
        """A content hash: caches keyed on it rebuild only what changed."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]

    def undo(self) -> Session:
        if not self.steps:
            raise SessionError("nothing to undo")
        return replace(self, steps=self.steps[:-1], redo_stack=(self.steps[-1],) + self.redo_stack)


def new_session(model: str | Mapping = zoo.DEFAULT_MODEL, name: str | None = None, target: dict | None = None,
                **options: Any) -> Session:
    """A session on zoo model ``model`` (with ``options``), or on a "model" field such as
    ``zoo.file_model`` gives for an imported file."""
    spec = {"zoo": model, **options} if isinstance(model, str) else dict(model)
    zoo.load_model(spec)  # refuse unknown models and changed files now
    if isinstance(model, str):
        default = model
    else:  # the file's name, as a session name may be
        default = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(spec["file"]).stem).lstrip("_.-")[:80] or "model"
    return Session(name or default, dict(target or DEFAULT_TARGET), spec)


@dataclass(frozen=True)
class State:
    """What a session's steps amount to: the layouts, and each kernel's schedule.

    Immutable: ``push`` returns a new state. The program and scheduled kernels are computed on
    first use and shared with the states derived from this one while they stay valid."""

    session: Session
    graph: Graph
    book: LayoutBook = field(default_factory=LayoutBook)
    schedules: Mapping[str, KernelSchedule] = field(default_factory=dict)
    _funcs: dict = field(default_factory=dict, repr=False, compare=False)  # memo: kernel -> PrimFunc
    _schs: dict = field(default_factory=dict, repr=False, compare=False)  # memo: kernel -> its s_tir.Schedule
    _chosen: dict = field(default_factory=dict, repr=False, compare=False)  # memo: kernel -> the policy's schedule

    @staticmethod
    def of(session: Session) -> State:
        """The state before any step of ``session``."""
        try:
            graph = zoo.load_model(session.model)
        except WorkbenchError as e:
            raise SessionError(f'field "model": {e}') from None
        return State(replace(session, steps=(), redo_stack=()), graph)

    ########## Steps ##########

    def push(self, step: Step) -> State:
        """This state with one more step (the redo stack cleared); refused steps raise
        ``SessionError`` naming the step's index and target, and change nothing."""
        if not isinstance(step, Step):
            raise SessionError(f"expected a Step, got {type(step).__name__}")
        index = len(self.session.steps)
        try:
            new = self._apply(step)
        except WorkbenchError as e:
            kind = "layout" if step.kind == "preset" else step.kind
            raise SessionError(f"action {index} ({kind} on {step.target!r}): {e}", reason=e.reason) from None
        return new._replace(session=replace(self.session, steps=self.session.steps + (step,), redo_stack=()))

    def redo(self) -> State:
        stack = self.session.redo_stack
        if not stack:
            raise SessionError("nothing to redo")
        new = self.push(stack[0])
        return new._replace(session=replace(new.session, redo_stack=stack[1:]))

    def with_expert_schedule(self, kernel: str) -> State:
        """This state with the kernel's expert schedule (``policy.expert_schedule``) pushed as
        ordinary loop steps; refused when the kernel already has a schedule (it is derived from
        the unscheduled kernel). A kernel without a complex op gets its analytic schedule."""
        kernel = self._kernel(kernel)
        if (kind := self.kernel_schedule(kernel).kind) != "default":
            raise SessionError(f"kernel {kernel} already has a schedule ({kind}): undo it first, the expert "
                               "schedule starts from the unscheduled kernel")
        try:
            steps = expert_schedule(self.program, kernel, self.session.target).steps
        except WorkbenchError as e:
            raise SessionError(f"no expert schedule for kernel {kernel}: {e}") from None
        state = self
        for step in steps:
            state = state.push(step)
        return state

    def with_expert_schedules(self) -> State:
        """Every kernel that holds a complex op and has no schedule yet, on its expert schedule."""
        state = self
        for k in self.program.plan.kernels:
            if k.ops and self.graph.node(k.head).kind == "complex" and self.kernel_schedule(k.name).kind == "default":
                state = state.with_expert_schedule(k.name)
        return state

    def renamed(self, name: str) -> State:
        """The same state under another session name (as saved under that name)."""
        return self._replace(session=replace(self.session, name=name))

    def home_kernel(self, op: str | None = None) -> str:
        """The kernel a page shows first: the one holding ``op``, else the first complex op's."""
        kernels = self.program.plan.kernels
        return next((k.name for k in kernels if op in k.ops), None) or next(
            (k.name for k in kernels if k.ops and self.graph.node(k.head).kind == "complex"), kernels[0].name)

    def undo(self) -> State:
        """The state without the last step (one replay)."""
        return replay(self.session.undo())

    def _apply(self, step: Step) -> State:
        if step.kind in ("layout", "preset"):
            return self._with_book(_layout(self.graph, self.book, step))
        kernel = self._kernel(step.target)
        if step.kind == "loop":
            old = self.kernel_schedule(kernel)
            # a tuned kernel keeps its trace: the step names its blocks and loops (conv_init, ...)
            if old.kind in ("loop steps", "tuned"):
                base, start = old, self._schs.get(kernel)  # None: never applied, so replayed in full below
            else:  # a policy's schedule (conversion, pinned) is replaced: the step starts from the kernel
                base, start = KernelSchedule("loop steps"), self.program.funcs[kernel]
            sched = KernelSchedule("loop steps", base.steps + (step,), trace=base.trace)
            new = self._with_schedule(kernel, sched)
            if start is not None:  # the one new step on a copy of the current schedule
                try:
                    new._schs[kernel] = apply_step(start, step)
                except LoopError as e:  # named as a full replay names it
                    raise LoopError(f"step {len(base.steps)}: {e}", reason=e.reason) from None
        else:  # tuned: its layouts first (replacing those of the same keys), then its trace
            state = self
            for lay in step.get("layouts", []):
                state = state._with_book(_layout(self.graph, state.book, Step.from_json(lay), fresh=True))
            new = state._with_schedule(state._kernel(step.target), KernelSchedule("tuned", trace=step.get("trace")))
        new.scheduled_func(kernel)  # a schedule TVM refuses is refused now, not at build time
        return new

    def _replace(self, **changes: Any) -> State:
        new = replace(self, **changes)
        if "book" not in changes and "program" in self.__dict__:  # same layouts, same unscheduled program
            new.__dict__["program"] = self.__dict__["program"]
        return new

    def _with_book(self, book: LayoutBook) -> State:
        """This state under new layouts. A kernel the layouts change loses its schedule (a trace
        finds its blocks and loops by the kernel's structure); one they leave as it was keeps it:
        in a network, an op's layout changes its neighbours' kernels only, not every tuned one."""
        new = self._replace(book=book, schedules={}, _funcs={}, _schs={}, _chosen={})
        if not self.schedules:
            return new
        before, after = self.program.funcs, new.program.funcs
        kept = [k for k in self.schedules if k in after and tvm_ffi.structural_equal(before[k], after[k])]
        return new._replace(schedules={k: self.schedules[k] for k in kept},
                            _funcs={k: self._funcs[k] for k in kept if k in self._funcs},
                            _schs={k: self._schs[k] for k in kept if k in self._schs})

    def _with_schedule(self, kernel: str, sched: KernelSchedule) -> State:
        return self._replace(schedules={**self.schedules, kernel: sched},
                             _funcs={k: f for k, f in self._funcs.items() if k != kernel},
                             _schs={k: s for k, s in self._schs.items() if k != kernel})

    def _kernel(self, op: str) -> str:
        names = [k.name for k in self.program.plan.kernels]
        if op not in names:
            raise SessionError(f"no kernel {op!r} under the current layouts; kernels: {', '.join(names)}")
        return op

    ########## Derived values ##########

    @cached_property
    def program(self) -> Program:
        """The unscheduled program under the current layouts."""
        return make_program(self.graph, self.book)

    def kernel_schedule(self, kernel: str) -> KernelSchedule:
        """The kernel's schedule, as ``policy.choose`` gives it: the session's own (loop steps
        or a tuned trace), else the session's pin of it, else the policy's present choice."""
        own = self.schedules.get(kernel)
        if own is None and kernel in self._chosen:
            return self._chosen[kernel]
        sched = choose(self.program, kernel, self.session.target, own=own, pinned=self.session.pin(kernel))
        if own is None:
            self._chosen[kernel] = sched
        return sched

    def tvm_schedule(self, kernel: str):
        """The kernel's ``tvm.s_tir.Schedule`` after its schedule (a new one each call)."""
        return self._schedule_of(kernel).copy()

    def _schedule_of(self, kernel: str):
        """The kernel's schedule applied (memoized; a push fills it with one step on its
        predecessor's, so only a state that never applied it replays the whole schedule)."""
        if kernel not in self._schs:
            self._schs[kernel] = self.kernel_schedule(kernel).apply(self.program.funcs[kernel])
        return self._schs[kernel]

    def scheduled_func(self, kernel: str):
        """The kernel's PrimFunc after its schedule (memoized: pages and replay ask often)."""
        if kernel not in self._funcs:
            sched = self.kernel_schedule(kernel)
            self._funcs[kernel] = (self.program.funcs[kernel] if sched.kind == "default"
                                   else self._schedule_of(kernel).mod["main"])
        return self._funcs[kernel]

    def scheduled_program(self) -> Program:
        return self.program.with_funcs({k: self.scheduled_func(k) for k in self.program.funcs
                                         if self.kernel_schedule(k).kind != "default"})

    def pinned(self) -> State:
        """This state with every kernel its steps leave unscheduled pinned to its present schedule
        (the session's pins, as a saved file holds them)."""
        pins = tuple(Pin(k, fingerprint(self.program.funcs[k], self.session.target), self.kernel_schedule(k))
                     for k in self.program.funcs if k not in self.schedules)
        return self._replace(session=replace(self.session, pins=pins))


def _layout(graph: Graph, book: LayoutBook, step: Step, fresh: bool = False) -> LayoutBook:
    if step.kind == "preset":
        steps = preset_actions(graph, step.primitive, step.target, **step.kwargs)
    else:
        steps = [step]
    if fresh:  # a tuned result replaces the layouts of the keys it sets
        for k in dict.fromkeys(s.target for s in steps):
            book = book.with_layout(k, key_base(graph, k))
    for s in steps:
        book = apply_layout(graph, book, s.target, s.primitive, s.kwargs)
    return book


def replay(session: Session) -> State:
    """Rebuild the state from scratch, each step applied once (raises SessionError naming the
    first bad step)."""
    state = State.of(session)
    for step in session.steps:
        state = state.push(step)
    return state._replace(session=session)


########## File format ##########

def check_target(target: Mapping) -> None:
    """Refuse a target this workbench cannot build for, naming the field (before TVM sees it)."""
    kind = target.get("kind")
    if kind is None:
        raise SessionError('field "target": needs a "kind" (e.g. {"kind": "llvm", "num-cores": 2})')
    if kind != "llvm":
        raise SessionError(f'field "target": target kind {kind!r} is not supported here (only "llvm": CPUs)')
    cores = target.get("num-cores", 1)
    if not isinstance(cores, int) or isinstance(cores, bool) or not 1 <= cores <= 256:
        raise SessionError(f'field "target": "num-cores" must be an integer in [1, 256], got {cores!r}')
    cpu = target.get("mcpu")
    if cpu is not None and not (isinstance(cpu, str) and _CPU.match(cpu)):
        raise SessionError(f'field "target": "mcpu" must be an LLVM CPU name such as "znver3", got {cpu!r}')


def parse(text: str) -> Session:
    """Parse a session file and check its structure (no replay: see ``loads_state``)."""
    if (size := len(text.encode())) > MAX_SESSION_MB << 20:
        raise SessionError(f"a session file may be at most {MAX_SESSION_MB} MB; this one is {size / 2**20:.2f} MB")
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise SessionError(f"not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise SessionError("a session file is a JSON object")
    if d.get("format") != FORMAT:
        raise SessionError(f'field "format" must be "{FORMAT}", got {d.get("format")!r}')
    version = d.get("version")
    if type(version) is not int or version not in READS:
        raise SessionError(f'field "version": unsupported version {version!r} (this workbench reads '
                           f'{", ".join(map(str, READS))})')
    for f, typ in (("name", str), ("target", dict), ("model", dict), ("actions", list)):
        if not isinstance(d.get(f), typ):
            raise SessionError(f'field "{f}" must be a {typ.__name__}, got {type(d.get(f)).__name__}')
    if not _NAME.match(d["name"]):
        raise SessionError(f'field "name": {d["name"]!r} is not a valid session name (letters, digits, _ . -)')
    check_target(d["target"])
    steps = tuple(Step.from_json(a, i) for i, a in enumerate(d["actions"]))
    pinned = d.get("pinned", []) if version > 1 else []  # version 1 pinned nothing
    if not isinstance(pinned, list):
        raise SessionError(f'field "pinned" must be a list, got {type(pinned).__name__}')
    return Session(d["name"], d["target"], d["model"], steps, pins=tuple(Pin.from_json(p, i)
                                                                         for i, p in enumerate(pinned)))


def loads_state(text: str) -> State:
    """Parse and validate a session file (structure, then one replay, then its pins that hold
    applied): the replayed state."""
    state = replay(parse(text))
    for i, pin in enumerate(state.session.pins):
        if pin.kernel in state.program.funcs and state.kernel_schedule(pin.kernel) is pin.schedule:
            try:
                state.scheduled_func(pin.kernel)
            except WorkbenchError as e:
                raise SessionError(f'field "pinned": entry {i} ({pin.kernel}): {e}') from None
    return state


def loads(text: str) -> Session:
    """Parse and validate a session file (structure, then a full replay)."""
    return loads_state(text).session


def dumps(session: Session | State) -> str:
    """The session file's text, every kernel's schedule pinned (``State.pinned``; a ``Session``
    is replayed for it)."""
    state = session if isinstance(session, State) else replay(session)
    return json.dumps(state.pinned().session.to_json(), indent=1) + "\n"


def _read(path: str | os.PathLike) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise SessionError(f"cannot read session {path}: {e.strerror}") from None


def load(path: str | os.PathLike) -> Session:
    return loads(_read(path))


def load_state(path: str | os.PathLike) -> State:
    return loads_state(_read(path))


def list_sessions(folder: str | os.PathLike) -> list[str]:
    """The names of the session files in ``folder`` (sorted)."""
    return sorted(p.stem for p in Path(folder).glob("*.json") if _NAME.match(p.stem))


def safe_path(folder: str | os.PathLike, name: str) -> Path:
    """``folder/name.json``, refusing names that could escape the folder."""
    if not _NAME.match(name) or ".." in name:
        raise SessionError(f"invalid session name {name!r}: use letters, digits, _ . - (no path parts)")
    return Path(folder) / f"{name}.json"


def save(session: Session | State, path: str | os.PathLike) -> Path:
    """Write the session file (``dumps``) atomically (``write_atomic``)."""
    return write_atomic(path, dumps(session))
