"""The TE definition of an expression op, in the op library's form (``ops.OpDef.compute``): a body
from the output's logical index to its value, reading every input through its layout's reader,
with one TE reduction over the reduction indices for ``+=`` (``te.sum``) and ``max=`` (``te.max``).

``exp``, ``tanh`` and ``sigmoid`` are the library's vectorizable approximations (``fastmath``).
``where`` is a select, or an ``if_then_else`` when its condition is a guard on indices (its side
may read outside a tensor where the guard discards it: ``define``). A sliding-window
read ``s*y + r`` (an output index times a constant plus reduction indices, as a convolution's)
passes its ``Window``, so that an unfolded input is read tile by tile (ALT's Eq. 1).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import tvm
from tvm import te

from ..fastmath import fast_exp, fast_sigmoid, fast_tanh
from ...base.index import Window, bind_axis
from .define import ExprOp, index_range, is_guard
from .fold import fold_index, fold_value
from .nodes import Access, Binary, Call, Name, Node, Num, walk

__all__ = ["te_body"]

_F32 = "float32"
_FUNCTIONS = {"exp": fast_exp, "log": tvm.tirx.log, "tanh": fast_tanh, "sigmoid": fast_sigmoid,
              "max": tvm.tirx.max, "min": tvm.tirx.min, "where": tvm.tirx.Select}
_COMPARE = {"<": tvm.tirx.LT, "<=": tvm.tirx.LE, ">": tvm.tirx.GT, ">=": tvm.tirx.GE, "==": tvm.tirx.EQ,
            "!=": tvm.tirx.NE}


class _TE:
    """``fold.Backend`` over TVM expressions, at one output index (``env``)."""

    def __init__(self, op: ExprOp, readers: Sequence[Any], env: Mapping[str, Any]) -> None:
        self.op, self.readers, self.env = op, dict(zip(op.inputs, readers)), env

    def const(self, value: float) -> Any:
        return tvm.tirx.const(value, _F32)

    def cast(self, index: Any) -> Any:
        return tvm.tirx.const(float(index), _F32) if isinstance(index, int) else tvm.tirx.Cast(_F32, index)

    def access(self, node: Access, indices: list[Any]) -> Any:
        wins = {k: w for k, i in enumerate(node.indices) if (w := _window(i, self.env, self.op)) is not None}
        return self.readers[node.tensor](indices, wins or None)

    def call(self, node: Call, args: list[Any]) -> Any:
        if node.fn == "where" and is_guard(node.args[0]):  # evaluates one side only: it may read outside
            return tvm.tirx.if_then_else(*args)
        return _FUNCTIONS[node.fn](*args)

    def compare(self, op: str, a: Any, b: Any) -> Any:
        return _COMPARE[op](*(tvm.tirx.const(x, "int32") if isinstance(x, int) else x for x in (a, b)))

    def logic(self, op: str, args: list[Any]) -> Any:
        return {"and": tvm.tirx.And, "or": tvm.tirx.Or, "not": tvm.tirx.Not}[op](*args)


def _window(node: Node, env: Mapping[str, Any], op: ExprOp) -> Window | None:
    """The window of a read ``s*v + R`` (``v`` an output index, ``s`` > 0, ``R`` made of reduction
    indices only, in either order), else None."""
    if not (isinstance(node, Binary) and node.op == "+"):
        return None
    extents = dict(op.extents)
    for scaled, rest in ((node.a, node.b), (node.b, node.a)):
        v, stride = _scaled_index(scaled)
        names = {n.name for n in walk(rest) if isinstance(n, Name)}
        if v in op.out_indices and names and names <= set(op.reduction):
            lo, hi = index_range(rest, extents)
            return Window(env[v], stride, fold_index(rest, env), lo, hi - lo + 1, extents[v])
    return None


def _scaled_index(node: Node) -> tuple[str | None, int]:
    """``v`` or ``s*v`` (``s`` a positive constant) as ``(v, s)``; else ``(None, 0)``."""
    if isinstance(node, Name):
        return node.name, 1
    if isinstance(node, Binary) and node.op == "*":
        for c, v in ((node.a, node.b), (node.b, node.a)):
            if isinstance(c, Num) and isinstance(v, Name) and c.value > 0:
                return v.name, int(c.value)
    return None, 0


def te_body(op: ExprOp, readers: Sequence[Any]):
    """``body(idx)``: the op's value at logical output index ``idx`` (``readers``: one per input,
    in ``op.inputs`` order)."""
    extents = dict(op.extents)

    def body(idx: list) -> Any:
        env = dict(zip(op.out_indices, idx))
        axes = []
        for r in op.reduction:
            ax = te.reduce_axis((0, extents[r]), r)
            bind_axis(ax.var, extents[r])  # so lowering's index simplifier knows its range
            env[r] = ax.var
            axes.append(ax)
        value = fold_value(op.statement.rhs, env, _TE(op, readers, env))
        if not axes:
            return value
        return te.sum(value, axis=axes) if op.statement.reduce == "+=" else te.max(value, axis=axes)

    return body
