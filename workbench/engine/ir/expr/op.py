"""Expression ops in the op library: one op type per kind (``expr_complex``, ``expr_elementwise``,
``expr_other``: the kind decides how layouts treat the op), each node carrying its checked op as
the ``expr`` attribute (an ``ExprOp``, printed as its expression on the Graph page).

The TE definition is ``compute.te_body``, the reference ``interp.evaluate`` (NumPy, not TVM),
the FLOP count ``ExprOp.flops``.

>>> from workbench.engine.ir.graph import GraphBuilder
>>> b = GraphBuilder("mm")
>>> a, w = b.input("a", (3, 5)), b.input("w", (5, 7))
>>> name = add_expr_op(b, "mm", "out[i, j] += a[i, k] * w[k, j]")
>>> g = b.build(); g.node("mm").type, g.node("mm").label, g.tensors["mm"].shape, g.tensors["mm"].dims
('expr_complex', 'expr', (3, 7), 'IJ')
"""

from __future__ import annotations

from typing import Sequence

from ..graph import GraphBuilder
from ..ops import OpDef, register
from .compute import te_body
from .define import ExprOp, define
from .interp import evaluate

__all__ = ["KINDS", "add_expr_op"]

KINDS = ("complex", "elementwise", "other")


def _infer(shapes, a):
    op: ExprOp = a["expr"]
    if tuple(tuple(s) for s in shapes) != op.in_shapes:
        raise ValueError(f"{op} was checked for input shapes {op.in_shapes}, given {tuple(shapes)}")
    return op.out_shape


for _kind in KINDS:
    register(OpDef(f"expr_{_kind}", _kind, _infer, lambda readers, shapes, a, out: te_body(a["expr"], readers),
                   lambda shapes, a, out: a["expr"].flops, lambda vals, a: evaluate(a["expr"], vals),
                   labeler=lambda a: "expr", out_dims=lambda d, r, a: a["expr"].dims))


def add_expr_op(builder: GraphBuilder, name: str, text: str, out_shape: Sequence[int] | None = None,
                start_column: int = 1) -> str:
    """Add the expression op ``text`` to ``builder`` as op ``name``, reading the builder's tensors
    (``define``'s checks; ``ExprError`` names the column). Returns the op's output name."""
    op = define(text, {t: v.shape for t, v in builder.tensors.items()}, out_shape, start_column)
    return builder.op(name, op.type, *op.inputs, expr=op)
