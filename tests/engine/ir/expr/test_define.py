"""An expression op checked against its shapes (``engine.expr.define``): extents inferred from the
reads, declared shapes, the errors for an inconsistent, ambiguous or missing extent and for reads
outside a tensor (each naming the index), kinds and FLOP counts."""

from __future__ import annotations

import pytest

from workbench.engine.ir.expr import ExprError, define, parse
from workbench.engine.ir.expr.define import index_range
from workbench.engine.ir.expr.parser import parse_node
from workbench.engine.ir.ops import OPS

CONV = "out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]"


def test_a_strided_conv_infers_its_output_and_reduction_and_counts_flops_as_the_library():
    op = define(CONV, {"inp": (2, 3, 11, 9), "w": (5, 3, 3, 2)})
    assert op.out_shape == (2, 5, 5, 4)  # (11 - 3) // 2 + 1, (9 - 2) // 2 + 1
    assert op.reduction == ("c", "r", "s") and op.inputs == ("inp", "w") and op.kind == "complex"
    assert dict(op.extents) == {"n": 2, "k": 5, "y": 5, "x": 4, "c": 3, "r": 3, "s": 2}
    conv = OPS["conv2d"]
    assert op.flops == conv.flops([(2, 3, 11, 9), (5, 3, 3, 2)], {"stride": 2}, op.out_shape)
    assert op.dims == "NKYX" and op.type == "expr_complex" and str(op) == str(parse(CONV))
    assert str(op) == "out[n, k, y, x] += inp[n, c, 2 * y + r, 2 * x + s] * w[k, c, r, s]"


@pytest.mark.parametrize("text, shapes, kind, flops_per_point", [
    ("out[i, j] += a[i, k] * b[k, j]", {"a": (3, 4), "b": (4, 5)}, "complex", 2),
    ("out[i, j] = max(a[i, j], 0) * b[j]", {"a": (3, 4), "b": (4,)}, "elementwise", 2),
    ("out[i, j] = a[i, j] + i", {"a": (3, 4)}, "elementwise", 1),
    ("out[i, j] = a[j, i]", {"a": (3, 4)}, "other", 0),
    ("out[i, j] = a[i] * b[j]", {"a": (3,), "b": (4,)}, "other", 1),
    ("out[n, c, y, x] max= a[n, c, y + r, x + s] + b[r, s]", {"a": (1, 2, 6, 6), "b": (3, 3)}, "other", 2),
    ("out[i] += exp(a[i, j])", {"a": (3, 4)}, "other", 2),
    ("out[i] += (a[i, j] - m[i]) * (a[i, j] - m[i])", {"a": (3, 4), "m": (3,)}, "other", 4),
    ("out[i] = where(a[i] > 0, tanh(a[i]), sigmoid(-a[i]))", {"a": (3,)}, "elementwise", 4),
])
def test_kinds_and_flops(text, shapes, kind, flops_per_point):
    op = define(text, shapes)
    assert op.kind == kind
    points = 1
    for _, e in op.extents:
        points *= e
    assert op.flops == flops_per_point * points


def test_a_declared_shape_fixes_the_output_indices():
    op = define("out[i, j] = a[i]", {"a": (3,)}, out_shape=(3, 7))
    assert op.out_shape == (3, 7) and op.kind == "other"
    pool = define("out[n, y] max= a[n, 2*y + r]", {"a": (2, 9)}, out_shape=(2, 4))
    assert dict(pool.extents)["r"] == 3  # 2*3 + r <= 8


def test_quasi_affine_reads_infer_their_extents():
    op = define("out[i, j] = a[i // 2, i % 2, j]", {"a": (3, 2, 5)})
    assert op.out_shape == (6, 5)


# text, shapes, declared shape -> the error's fragment and its column
ERRORS = {
    "inconsistent": ("out[i] = a[i] + b[i]", {"a": (4,), "b": (5,)}, None,
                     "index i has inconsistent extents: 4 from a (dim 0: i), 5 from b (dim 0: i)", 12),
    "ambiguous": ("out[i] = a[2*i] + b[i + 1]", {"a": (8,), "b": (8,)}, None,
                  "the extent of index i is ambiguous: 4 from a (dim 0: 2 * i), 7 from b (dim 0: i + 1)", 14),
    "unbounded": ("out[i, j] = a[i]", {"a": (3,)}, None,
                  "cannot infer the extent of index j: no read bounds it; declare the output's shape", 1),
    "circular": ("out[y] max= a[2*y + r]", {"a": (9,)}, None, "cannot infer the extent of index y", 17),
    "outside": ("out[i] = a[i]", {"a": (4,)}, (5,), "index 0 of a[i] (i) spans 0..4, outside a's dim 0 (0..3)", 12),
    "outside at 0": ("out[i] = a[i + 5]", {"a": (4,)}, None,
                     "index 0 of a[i + 5] (i + 5) lies outside a's dim 0 (0..3) even at i = 0", 12),
    "negative": ("out[i] = a[i - 1]", {"a": (4,)}, (4,), "spans -1..2, outside a's dim 0", 12),
    "outside a guard": ("out[i] = where(i >= 1, a[i - 1], 0)", {"a": (4,)}, (6,),
                        "index 0 of a[i - 1] (i - 1) spans 0..4 where its where() conditions hold, outside a's dim 0",
                        26),
    "reduction with =": ("out[i] = a[i, j]", {"a": (2, 3)}, None,
                         "index j appears only on the right side: reduce over it with += or max=", 15),
    "+= without reduction": ("out[i] += a[i]", {"a": (2,)}, None, "+= reduces over indices that appear only on "
                             "the right side, and there is none here: write =", 1),
    "unknown tensor": ("out[i] = a[i] + c[i]", {"a": (2,)}, None, "unknown tensor 'c'; the tensors are a", 17),
    "rank": ("out[i] = a[i]", {"a": (2, 3)}, None, "a has 2 dims, a[i] gives 1 indices", 10),
    "reads itself": ("out[i] = out[i]", {"out": (2,)}, None, "out is the output: an op cannot read what it writes", 10),
    "declared rank": ("out[i] = a[i]", {"a": (2,)}, (2, 3),
                      "the declared shape has 2 dims, the output out[i] has 1", 1),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_each_shape_error_names_the_index_and_column(case):
    text, shapes, declared, message, column = ERRORS[case]
    with pytest.raises(ExprError) as e:
        define(text, shapes, declared)
    assert message in str(e.value)
    assert e.value.column == column, str(e.value)


def test_index_range_is_exact_on_quasi_affine_reads_and_a_superset_on_huge_grids():
    assert index_range(parse_node("(i // 2) * 2 + i % 2"), {"i": 5}) == (0, 4)  # intervals alone say 0..5
    assert index_range(parse_node("3 - 2*i + j // 4"), {"i": 3, "j": 9}) == (-1, 5)
    lo, hi = index_range(parse_node("i + j % 7 - k"), {"i": 1 << 12, "j": 1 << 12, "k": 3})
    assert (lo, hi) == (-2, (1 << 12) - 1 + 6)
    big = index_range(parse_node("(i // 2) * 2 + i % 2"), {"i": 1 << 23})
    assert big[0] <= 0 and big[1] >= (1 << 23) - 1


def test_equal_ops_are_equal_whatever_their_spacing():
    a = define("out[i]=a[i]*2.0", {"a": (3,)})
    b = define("out[ i ] = a[i] * 2.0", {"a": (3,)})
    assert a == b and hash(a) == hash(b) and a != define("out[i] = a[i] * 3.0", {"a": (3,)})
