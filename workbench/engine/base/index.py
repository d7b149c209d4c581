"""Index arithmetic that runs on Python ints, NumPy index arrays and TVM ``PrimExpr`` alike (the
layout algebra writes each index map once), and the scope that lets lowering simplify the
index expressions it builds.

>>> all_of([np.array([True, False]), np.array([True, True])]).tolist()
[True, False]
>>> minimum(3, 5), minimum(np.array([1, 9]), 4).tolist()
(3, [1, 4])
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import tvm

__all__ = ["Window", "all_of", "minimum", "index_scope", "bind_axis", "simplify"]


def _is_expr(*xs: Any) -> bool:
    return any(isinstance(x, tvm.ir.base.Node) for x in xs)


def minimum(a: Any, b: Any) -> Any:
    """The smaller of two indices, for whichever kind of index they are."""
    if _is_expr(a, b):
        return tvm.tirx.min(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)


def all_of(conds: Sequence[Any]) -> Any:
    """Conjunction of conditions, for whichever kind of index they are built from."""
    if not conds:
        return True
    if _is_expr(*conds):
        return tvm.tirx.all(*conds)
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


#: while lowering one stage: an analyzer that knows the ranges of its loop variables, so
#: index expressions such as ``(i0 * 16 + i2) // 16`` come out as ``i0`` (TVM's own passes do not
#: simplify them, and unsimplified div/mod blocks vectorization).
_SCOPE: contextvars.ContextVar[Any] = contextvars.ContextVar("index_scope", default=None)


@contextlib.contextmanager
def index_scope(axes: Sequence[tuple[Any, int]]):
    """Within it, ``simplify`` knows that each ``var`` of ``axes`` lies in ``[0, extent)``."""
    from tvm.sym.analyzer import Analyzer

    ana = Analyzer()
    for var, extent in axes:
        ana.bind(var, tvm.ir.Range(0, extent))
    token = _SCOPE.set(ana)
    try:
        yield ana
    finally:
        _SCOPE.reset(token)


def bind_axis(var: Any, extent: int) -> None:
    """Tell the current scope a reduction variable's range (no-op outside lowering)."""
    ana = _SCOPE.get()
    if ana is not None:
        ana.bind(var, tvm.ir.Range(0, extent))


def simplify(x: Any) -> Any:
    ana = _SCOPE.get()
    return ana.simplify(x) if ana is not None and _is_expr(x) else x


@dataclass(frozen=True, slots=True)
class Window:
    """A sliding-window access ``stride * i + offset`` with ``offset`` in ``[lo, lo + size)``
    and ``i`` in ``[0, count)``: what ALT's Eq. 1 needs to send each output tile to one
    contiguous input tile of an unfolded dimension."""

    i: Any
    stride: int
    offset: Any
    lo: int
    size: int
    count: int

    def shifted(self, by: int) -> "Window":
        return replace(self, offset=self.offset + by, lo=self.lo + by)
