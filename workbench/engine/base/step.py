"""One step of a session: the single record that the session file, the app, the tuner and the
layout/loop algebras all speak (``Step``), the frozen JSON its arguments are kept in (``Args``,
``freeze``, ``thaw``), and what a primitive takes (``PrimitiveSpec``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .errors import SessionError

__all__ = ["Step", "Args", "KINDS", "PrimitiveSpec", "freeze", "thaw"]

#: kind -> (required fields, optional fields) of its session-file form
_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "layout": (frozenset({"kind", "tensor", "primitive", "args"}), frozenset()),
    "preset": (frozenset({"kind", "tensor", "preset"}), frozenset({"params"})),
    "loop": (frozenset({"kind", "op", "primitive", "args"}), frozenset()),
    "tuned": (frozenset({"kind", "op", "trace"}), frozenset({"layouts", "latency_ms", "stage", "measurements"})),
}
KINDS = tuple(_FIELDS)
_TARGET = {"layout": "tensor", "preset": "tensor", "loop": "op", "tuned": "op"}


class Args(tuple):
    """A JSON object frozen as sorted ``(key, value)`` pairs, so it hashes and thaws back to a dict."""

    __slots__ = ()


def freeze(v: Any) -> Any:
    """JSON-like data made hashable: lists become tuples, dicts ``Args``, NumPy ints ints."""
    if isinstance(v, Mapping):
        return Args((k, freeze(x)) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return tuple(freeze(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def thaw(v: Any) -> Any:
    """The inverse of ``freeze``: plain lists and dicts again."""
    if isinstance(v, Args):
        return {k: thaw(x) for k, x in v}
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    return v


@dataclass(frozen=True, slots=True)
class Step:
    """One recorded action, frozen and hashable: ``kind`` (``layout``, ``preset``, ``loop`` or
    ``tuned``), ``target`` (the tensor key a layout step changes, or the kernel a loop/tuned step
    schedules; ``""`` inside a ``Layout``, whose tensor is implicit), ``primitive`` (the primitive
    or preset name, as TVM and ALT name them; ``"tuned"`` for a tuning result) and ``args``
    (pairs, with lists frozen to tuples and objects to ``Args``).

    >>> s = Step.make("layout", "conv.out", "split", dim=1, factors=[4, 16])
    >>> s
    Step(kind='layout', target='conv.out', primitive='split', args=(('dim', 1), ('factors', (4, 16))))
    >>> print(s)
    split(dim=1, factors=[4, 16])
    >>> s.to_json()
    {'kind': 'layout', 'tensor': 'conv.out', 'primitive': 'split', 'args': {'dim': 1, 'factors': [4, 16]}}
    >>> Step.from_json(s.to_json()) == s
    True
    >>> Step.from_json({"kind": "loop", "op": "conv", "primitive": "parallel"})
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.SessionError: action 0 (loop): missing field "args"
    """

    kind: str
    target: str
    primitive: str
    args: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def make(kind: str, target: str, primitive: str, **args: Any) -> Step:
        return Step(kind, target, primitive, tuple((k, freeze(v)) for k, v in args.items()))

    @property
    def kwargs(self) -> dict[str, Any]:
        """The arguments as a dict, with plain lists and dicts."""
        return {k: thaw(v) for k, v in self.args}

    def get(self, name: str, default: Any = None) -> Any:
        return self.kwargs.get(name, default)

    def on(self, target: str) -> Step:
        """The same primitive aimed at another target."""
        return Step(self.kind, target, self.primitive, self.args)

    def to_json(self) -> dict:
        """The session-file form of the step (``docs/session-format.md``)."""
        where = {"kind": "layout" if self.kind == "preset" else self.kind, _TARGET[self.kind]: self.target}
        if self.kind == "preset":
            return {**where, "preset": self.primitive, "params": self.kwargs}
        if self.kind == "tuned":
            return {**where, **self.kwargs}
        return {**where, "primitive": self.primitive, "args": self.kwargs}

    @staticmethod
    def from_json(a: Any, index: int = 0) -> Step:
        """Parse one session-file action; errors name the action index and field."""
        if not isinstance(a, dict):
            raise SessionError(f"action {index}: must be an object, got {type(a).__name__}")
        kind = a.get("kind")
        if kind not in ("layout", "loop", "tuned"):
            raise SessionError(f'action {index}: field "kind" must be one of [\'layout\', \'loop\', \'tuned\'], '
                               f"got {kind!r}")
        if kind == "layout" and "preset" in a:
            kind = "preset"
        need, optional = _FIELDS[kind]
        label = f"action {index} ({a['kind']})"
        if missing := sorted(need - set(a)):
            raise SessionError(f'{label}: missing field "{missing[0]}"')
        if extra := sorted(set(a) - need - optional):
            raise SessionError(f'{label}: unknown field "{extra[0]}"')
        for f in ("tensor", "op", "primitive", "preset"):
            if f in a and not isinstance(a[f], str):
                raise SessionError(f'{label}: field "{f}" must be a string')
        for f in ("args", "params"):
            if f in a and not isinstance(a[f], dict):
                raise SessionError(f'{label}: field "{f}" must be an object')
        target = a[_TARGET[kind]]
        if kind == "preset":
            return Step.make(kind, target, a["preset"], **a.get("params", {}))
        if kind == "tuned":
            return Step.make(kind, target, "tuned", **{k: v for k, v in a.items() if k not in ("kind", "op")})
        return Step.make(kind, target, a["primitive"], **a["args"])

    def __str__(self) -> str:
        if self.kind == "tuned":
            return f"tuned {self.get('stage', '')} schedule on {self.target}".replace("  ", " ")
        return f"{self.primitive}({', '.join(f'{k}={v!r}' for k, v in self.kwargs.items())})"


@dataclass(frozen=True, slots=True)
class PrimitiveSpec:
    """What a primitive (layout or loop) takes: enough to draw its form and validate its arguments.

    ``args`` maps each argument, in form order, to its kind: ``block`` (a block name), ``loop`` /
    ``loops`` (loop names of the block named by the ``loop_of`` argument), ``dim`` (a dim of the
    tensor's current layout), ``dims`` (several, in order), ``perm`` (all dims, permuted),
    ``int``, ``ints`` (a list of ints, one may be null or -1), ``tensor`` (a constant's name),
    ``str``, or for a buffer the block writes: ``written`` (its index), ``written_factors`` (one
    int per dim of it) and ``written_perm`` (its dims after those splits, permuted). ``tvm_args`` are the arguments a loop
    primitive passes on to the ``tvm.s_tir.Schedule`` method of the same name, in order
    (``*loops`` is spread); ``inverse_of`` names the primitive a layout primitive undoes.

    >>> PrimitiveSpec.parse("dim:dim factors:ints", "split a dim").args
    {'dim': 'dim', 'factors': 'ints'}
    """

    args: dict[str, str]
    doc: str
    tvm_args: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)
    loop_of: str = "block"
    inverse_of: str | None = None

    @staticmethod
    def parse(kinds: str, doc: str, **extra: Any) -> PrimitiveSpec:
        """From ``"name:kind name:kind ..."``."""
        return PrimitiveSpec(dict(a.split(":") for a in kinds.split()), doc, **extra)
