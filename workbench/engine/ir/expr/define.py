"""An expression op checked against its input shapes: the extent of every index, the output's
shape, the reduction indices, its kind for layouts and its FLOP count (``ExprOp``).

Extents: an index read plainly by some dim (``w[k, c, r, s]``: ``r`` is ``w``'s dim 2) takes that
dim's extent, and all such dims must agree; one read only inside larger index expressions
(``inp[n, c, 2*y + r, ...]``) takes the largest extent that keeps the read inside its tensor. A
declared output shape fixes the output's indices, a ``for`` clause the reduction indices it
names. Every read must lie inside its tensor (no implicit padding) wherever its guards hold: a
guard is a ``where`` condition on indices alone, ``where(h >= 1, x[h - 1], 0)`` pads.

Kinds (``ops.OpDef.kind``): ``complex`` for a sum of products of two or more tensors read with a
reduction index (convolutions, matmuls, capsule convs: layouts are tuned for it),
``elementwise`` when every read is the output's indices or a broadcast of them in order (one
read being exactly the output's), ``other`` otherwise (max pools, row sums, transposes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .check import kind_of
from .fold import NumPyBackend, fold_index, fold_value
from .lexer import ExprError
from .nodes import Access, Binary, Call, Name, Node, Statement, Unary, children, first_column, walk
from .parser import parse

__all__ = ["ExprOp", "define", "index_range", "is_guard"]

Shape = tuple[int, ...]

#: index grids larger than this are bounded by interval arithmetic instead of evaluated
_GRID = 1 << 22
#: no extent is inferred beyond this
_MAX_EXTENT = 1 << 30
_ARITHMETIC = ("+", "-", "*", "/")


@dataclass(frozen=True)
class ExprOp:
    """A checked expression op; equal ops (same tree and shapes) compare and hash equal. ``note``
    says what a reader should know that the text does not (a derived gradient's guards)."""

    statement: Statement
    inputs: tuple[str, ...]  # the tensors it reads, in order of first read
    in_shapes: tuple[Shape, ...]
    out_shape: Shape
    extents: tuple[tuple[str, int], ...]  # every index: the output's in order, then the reduction's
    reduction: tuple[str, ...]
    kind: str  # "complex" | "elementwise" | "other"
    note: str = field(default="", compare=False)

    def __str__(self) -> str:
        return str(self.statement)

    @property
    def type(self) -> str:
        """The op library's type for it (one per kind: ``expr_complex``...)."""
        return f"expr_{self.kind}"

    @property
    def out_indices(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.statement.out.indices)

    @property
    def dims(self) -> str:
        """One letter per output dim: its index's initial (``out[n, k, y, x]`` -> ``NKYX``)."""
        return "".join(i[0].upper() for i in self.out_indices)

    @property
    def flops(self) -> int:
        """Per point of the iteration space (output x reduction indices): one per arithmetic
        operator and function of the value, plus one for the reduction's add or max."""
        per = sum(1 for n in walk(self.statement.rhs) if isinstance(n, Call)
                  or isinstance(n, (Binary, Unary)) and n.op in _ARITHMETIC and kind_of(n) == "value")
        return (per + bool(self.reduction)) * math.prod(e for _, e in self.extents)


def define(text: str | Statement, shapes: Mapping[str, Sequence[int]], out_shape: Sequence[int] | None = None,
           start_column: int = 1) -> ExprOp:
    """Parse ``text`` (unless already parsed) and check it against ``shapes`` (every tensor it may
    read), with the output's shape declared by ``out_shape`` or inferred. Raises ``ExprError``.

    >>> op = define("out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]",
    ...             {"inp": (1, 3, 9, 11), "w": (4, 3, 3, 3)})
    >>> op.out_shape, op.reduction, op.kind, op.flops
    ((1, 4, 4, 5), ('c', 'r', 's'), 'complex', 4320)
    """
    stmt = parse(text, start_column) if isinstance(text, str) else text
    guarded = _guarded_reads(stmt.rhs, ())
    reads = [a for a, _ in guarded]
    inputs = tuple(dict.fromkeys(a.tensor for a in reads))
    for a in reads:
        if a.tensor == stmt.out.tensor:
            raise ExprError(f"{a.tensor} is the output: an op cannot read what it writes", a.column)
        if a.tensor not in shapes:
            raise ExprError(f"unknown tensor {a.tensor!r}; the tensors are {', '.join(shapes) or '(none)'}", a.column)
        if len(a.indices) != len(shapes[a.tensor]):
            raise ExprError(f"{a.tensor} has {len(shapes[a.tensor])} dims, {a} gives {len(a.indices)} indices",
                            a.column)
    outs = [i.name for i in stmt.out.indices]
    names: dict[str, Name] = {}  # each index at its first use, left to right
    for n in walk(stmt.rhs):
        if isinstance(n, Name):
            names.setdefault(n.name, n)
    reduction = tuple(dict.fromkeys([n for n in names if n not in outs] + [n for n, _ in stmt.domain]))
    if stmt.reduce == "=" and reduction:
        r = names[reduction[0]]
        raise ExprError(f"index {r.name} appears only on the right side: reduce over it with += or max=", r.column)
    if stmt.reduce != "=" and not reduction:
        raise ExprError(f"{stmt.reduce} reduces over indices that appear only on the right side, and there is none "
                        "here: write =", stmt.out.column)
    declared = {**_declared(stmt, out_shape), **dict(stmt.domain)}
    uses = [(a, k, int(shapes[a.tensor][k])) for a, guards in guarded if not guards for k in range(len(a.indices))]
    extents = _infer(outs + list(reduction), declared, uses, names, stmt)
    for a, guards in guarded:
        for k, node in enumerate(a.indices):
            dim, span = int(shapes[a.tensor][k]), _span(node, guards, extents)
            if span is not None and (span[0] < 0 or span[1] >= dim):
                where = " where its where() conditions hold" if guards else ""
                raise ExprError(f"index {k} of {a} ({node}) spans {span[0]}..{span[1]}{where}, outside {a.tensor}'s "
                                f"dim {k} (0..{dim - 1}): reads must stay inside their tensor", first_column(node))
    return ExprOp(stmt, inputs, tuple(tuple(int(d) for d in shapes[t]) for t in inputs),
                  tuple(extents[i] for i in outs), tuple((i, extents[i]) for i in outs + list(reduction)), reduction,
                  _kind(stmt, reads, reduction, outs))


def _declared(stmt: Statement, out_shape: Sequence[int] | None) -> dict[str, int]:
    if out_shape is None:
        return {}
    outs = stmt.out.indices
    if len(out_shape) != len(outs):
        raise ExprError(f"the declared shape has {len(out_shape)} dims, the output {stmt.out} has {len(outs)}",
                        stmt.out.column)
    if any(int(d) < 1 for d in out_shape):
        raise ExprError(f"the declared shape {tuple(out_shape)} needs positive dims", stmt.out.column)
    return {i.name: int(d) for i, d in zip(outs, out_shape)}


def _infer(order: list[str], declared: dict[str, int], uses: list[tuple[Access, int, int]],
           names: Mapping[str, Name], stmt: Statement) -> dict[str, int]:
    """Every index's extent (see the module docstring)."""
    known = dict(declared)
    for v in order:
        if v in known:
            continue
        plain = [(dim, a, k) for a, k, dim in uses if a.indices[k] == Name(v)]
        if len({dim for dim, _, _ in plain}) > 1:
            raise ExprError(f"index {v} has inconsistent extents: {_sources(plain)}", names[v].column)
        if plain:
            known[v] = plain[0][0]
    while pending := [v for v in order if v not in known]:
        found = {}
        for v in pending:
            cands = []
            for a, k, dim in uses:
                node = a.indices[k]
                free = {n.name for n in walk(node) if isinstance(n, Name)}
                if v in free and free - {v} <= set(known):
                    if (e := _largest(node, v, known, dim, a, k)) is not None:
                        cands.append((e, a, k))
            if len({e for e, _, _ in cands}) > 1:
                raise ExprError(f"the extent of index {v} is ambiguous: {_sources(cands)}", names[v].column)
            if cands:
                found[v] = cands[0][0]
        if not found:
            v = pending[0]
            where = names[v].column if v in names else stmt.out.column
            hint = (f"; declare the output's shape (name[D1, ...]: {stmt.out} ...)" if v not in names
                    or v in {i.name for i in stmt.out.indices} else "")
            raise ExprError(f"cannot infer the extent of index {v}: no read bounds it{hint}", where)
        known.update(found)
    return known


def _sources(cands: list[tuple[int, Access, int]]) -> str:
    return ", ".join(f"{e} from {a.tensor} (dim {k}: {a.indices[k]})" for e, a, k in cands)


def _largest(node: Node, v: str, known: Mapping[str, int], dim: int, a: Access, k: int) -> int | None:
    """The largest extent of ``v`` that keeps ``node`` inside ``[0, dim)`` (None when no extent
    leaves it: ``v % 4``)."""
    def inside(e: int) -> bool:
        lo, hi = index_range(node, {**known, v: e})
        return lo >= 0 and hi < dim

    if inside(_MAX_EXTENT):
        return None
    if not inside(1):
        raise ExprError(f"index {k} of {a} ({node}) lies outside {a.tensor}'s dim {k} (0..{dim - 1}) even at "
                        f"{v} = 0", first_column(node))
    lo, hi = 1, _MAX_EXTENT  # inside(lo), not inside(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if inside(mid) else (lo, mid)
    return lo


def is_guard(cond: Node) -> bool:
    """Whether a ``where`` condition tests indices only (no element, no function): a guard."""
    return not any(isinstance(n, (Access, Call)) for n in walk(cond))


def _guarded_reads(node: Node, guards: tuple) -> list[tuple[Access, tuple[tuple[Node, bool], ...]]]:
    """Every read under ``node`` with the guards it sits under: (condition, the side it is on)."""
    if isinstance(node, Access):
        return [(node, guards)]
    if isinstance(node, Call) and node.fn == "where" and is_guard(node.args[0]):
        cond, yes, no = node.args
        return _guarded_reads(yes, guards + ((cond, True),)) + _guarded_reads(no, guards + ((cond, False),))
    return [r for kid in children(node) for r in _guarded_reads(kid, guards)]


def _span(node: Node, guards: tuple[tuple[Node, bool], ...], extents: Mapping[str, int]) -> tuple[int, int] | None:
    """``index_range`` of ``node`` over the points where every guard takes its side (None: at no
    point); on a grid of more than 4M points, over all points. Only the guards' conjuncts tied to
    ``node``'s indices (directly or through other conjuncts) count: the others do not move it."""
    guards = _tied(node, [c for g in guards for c in _conjuncts(*g)])
    free = sorted({n.name for g in (node, *(c for c, _ in guards)) for n in walk(g) if isinstance(n, Name)})
    if not guards or math.prod(extents[n] for n in free) > _GRID:
        return index_range(node, extents)
    grid = _grid(free, extents)
    shape = [extents[n] for n in free]
    mask = np.ones(shape, dtype=bool)
    for cond, side in guards:
        mask &= np.broadcast_to(np.asarray(fold_value(cond, grid, NumPyBackend({}))) == side, shape)
    if not mask.any():
        return None
    vals = np.broadcast_to(fold_index(node, grid), shape)[mask]
    return int(vals.min()), int(vals.max())


def _conjuncts(cond: Node, side: bool) -> list[tuple[Node, bool]]:
    """``a and b`` true (or ``a or b`` false) as its parts, each with its side."""
    if isinstance(cond, Binary) and cond.op == ("and" if side else "or"):
        return _conjuncts(cond.a, side) + _conjuncts(cond.b, side)
    return [(cond, side)]


def _tied(node: Node, conds: list[tuple[Node, bool]]) -> tuple[tuple[Node, bool], ...]:
    names = {n.name for n in walk(node) if isinstance(n, Name)}
    tied: list[tuple[Node, bool]] = []
    while more := [c for c in conds if c not in tied and (names & {n.name for n in walk(c[0]) if isinstance(n, Name)}
                                                          or not any(isinstance(n, Name) for n in walk(c[0])))]:
        tied += more
        names |= {n.name for c, _ in more for n in walk(c) if isinstance(n, Name)}
    return tuple(tied)


def _grid(free: list[str], extents: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Each index as an axis of one broadcast grid over ``free``."""
    return {n: np.arange(extents[n], dtype=np.int64).reshape([-1 if j == i else 1 for j in range(len(free))])
            for i, n in enumerate(free)}


def index_range(node: Node, extents: Mapping[str, int]) -> tuple[int, int]:
    """The smallest and largest value of an index expression over its indices' ranges: exact on
    grids of up to 4M points, by interval arithmetic (a superset) beyond.

    >>> from workbench.engine.ir.expr.parser import parse_node
    >>> index_range(parse_node("(i // 2) * 2 + i % 2"), {"i": 5}), index_range(parse_node("2*y - r"), {"y": 4, "r": 3})
    ((0, 4), (-2, 6))
    """
    free = sorted({n.name for n in walk(node) if isinstance(n, Name)})
    if math.prod(extents[n] for n in free) <= _GRID:
        vals = np.asarray(fold_index(node, _grid(free, extents)))
        return int(vals.min()), int(vals.max())
    return fold_index(node, {n: _Interval(0, extents[n] - 1) for n in free}).bounds


class _Interval:
    """``[lo, hi]`` under the index operators (the other operand a constant for ``*``, ``//``, ``%``)."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    @property
    def bounds(self) -> tuple[int, int]:
        return self.lo, self.hi

    @staticmethod
    def of(x: "int | _Interval") -> "_Interval":
        return x if isinstance(x, _Interval) else _Interval(x, x)

    def __add__(self, o):
        o = _Interval.of(o)
        return _Interval(self.lo + o.lo, self.hi + o.hi)

    __radd__ = __add__

    def __neg__(self):
        return _Interval(-self.hi, -self.lo)

    def __sub__(self, o):
        return self + -_Interval.of(o)

    def __rsub__(self, o):
        return _Interval.of(o) + -self

    def __mul__(self, c: int):
        return _Interval(min(self.lo * c, self.hi * c), max(self.lo * c, self.hi * c))

    __rmul__ = __mul__

    def __floordiv__(self, c: int):
        return _Interval(self.lo // c, self.hi // c)

    def __mod__(self, c: int):
        return _Interval(0, c - 1) if self.hi - self.lo >= c or self.lo // c != self.hi // c else \
            _Interval(self.lo % c, self.hi % c)


def _kind(stmt: Statement, reads: list[Access], reduction: tuple[str, ...], outs: list[str]) -> str:
    if reduction:
        reducing = {a.tensor for a in reads
                    if any(isinstance(n, Name) and n.name in reduction for i in a.indices for n in walk(i))}
        return "complex" if stmt.reduce == "+=" and len(reducing) >= 2 else "other"
    plain = [[i.name for i in a.indices] if all(isinstance(i, Name) for i in a.indices) else None for a in reads]
    if all(p is not None and _in_order(p, outs) for p in plain) and outs in plain:
        return "elementwise"
    return "other"


def _in_order(sub: list[str], full: list[str]) -> bool:
    it = iter(full)
    return all(x in it for x in sub)
