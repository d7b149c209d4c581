"""Transposed convolutions by stride phases (``ops_conv``): PyTorch parity over strides
1-3, odd and even kernels, paddings and output paddings in 1-D, 2-D and 3-D; the lowered loop
nest sums only the taps of each output's phase (no conditional in the reduction), and it
executes exactly the FLOP count's multiply-adds, or more by exactly the zero-padded weight taps
when a kernel dim is not a multiple of its stride; clear errors for impossible arguments."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest
import tvm
from tvm import tirx

from workbench.engine.models import zoo
from workbench.engine.base.errors import GraphError
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.loops.primitives import list_blocks, list_loops, walk_nest
from workbench.engine.ir.ops import tconv_executed_macs
from workbench.engine.build.program import make_program

torch = pytest.importorskip("torch")
TARGET = {"kind": "llvm", "num-cores": 2}


def _tup(v, nd):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd


def _graph(cases: list[tuple[tuple, tuple, dict]]):
    """One graph with a transposed conv per case (input shape, weight shape, attrs): one build
    for many configurations."""
    b = GraphBuilder("tconvs")
    for i, (xs, ws, attrs) in enumerate(cases):
        x = b.input(f"x{i}", xs)
        b.op(f"op{i}", f"conv_transpose{len(xs) - 2}d", x, b.const(f"w{i}", ws), **attrs)
    return b.build()


def _grid_1d():
    for s, k, p in itertools.product((1, 2, 3), (1, 2, 3, 4, 5), (0, 1, 2)):
        for op in sorted({0, s - 1}):
            if (6 - 1) * s - 2 * p + k + op > 0:
                yield (2, 3, 6), (3, 2, k), dict(stride=s, padding=p, output_padding=op)


GRIDS = {
    1: list(_grid_1d()),
    2: [((1, 3, 5, 4), (3, 2, 4, 4), dict(stride=2, padding=1)),                   # DCGAN-like, K = 2s
        ((2, 2, 4, 5), (2, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),  # odd K
        ((1, 3, 4, 4), (3, 2, 3, 5), dict(stride=(3, 2), padding=(0, 2), output_padding=(2, 1))),
        ((1, 2, 5, 3), (2, 4, 2, 1), dict(stride=3, padding=(1, 0))),               # K < s: holes
        ((1, 4, 4, 4), (4, 2, 3, 3), dict(stride=1, padding=1)),                    # plain "same"
        ((1, 2, 3, 6), (2, 2, 5, 4), dict(stride=(1, 3), padding=(2, 1), output_padding=(0, 2)))],
    3: [((1, 2, 3, 4, 3), (2, 3, 4, 4, 4), dict(stride=2, padding=1)),
        ((1, 3, 3, 2, 4), (3, 2, 3, 2, 5), dict(stride=(2, 1, 3), padding=(1, 0, 2), output_padding=(1, 0, 2))),
        ((2, 2, 2, 3, 3), (2, 2, 3, 3, 3), dict(stride=3, padding=0, output_padding=1))],
}


@pytest.mark.slow
@pytest.mark.parametrize("nd", sorted(GRIDS))
def test_phases_match_pytorch(nd):
    cases = GRIDS[nd]
    g = _graph(cases)
    values = g.random_inputs(seed=nd)
    got = make_program(g).build(TARGET).run(values)
    fn = getattr(torch.nn.functional, f"conv_transpose{nd}d")
    for i, (xs, ws, attrs) in enumerate(cases):
        want = fn(torch.from_numpy(values[f"x{i}"]).double(), torch.from_numpy(values[f"w{i}"]).double(),
                  stride=attrs["stride"], padding=attrs["padding"], output_padding=attrs.get("output_padding", 0))
        assert got[f"op{i}"].shape == tuple(want.shape) == g.tensor(f"op{i}").shape, (xs, ws, attrs)
        np.testing.assert_allclose(got[f"op{i}"], want.numpy(), rtol=1e-4, atol=1e-5 * float(want.abs().max()),
                                   err_msg=str((xs, ws, attrs)))


########## The lowered loop nest ##########

_FIELDS = ("seq", "body", "then_case", "else_case", "block", "init", "value", "a", "b", "args", "indices",
           "condition", "true_value", "false_value")


def _conditionals(node) -> list[str]:
    """Kinds of the conditionals (if_then_else calls, selects, if statements) under ``node``."""
    found: list[str] = []

    def visit(n) -> None:
        if isinstance(n, (tirx.Select, tirx.IfThenElse)):
            found.append(type(n).__name__)
        if isinstance(n, tvm.ir.expr.Call) and "if_then_else" in str(n.op):
            found.append("if_then_else")
        for f in _FIELDS:
            c = getattr(n, f, None)
            for child in (c if isinstance(c, Sequence) and not isinstance(c, str) else [c]):
                if isinstance(child, tvm.ir.base.Node):
                    visit(child)

    visit(node)
    return found


def _reduction_nest(func, block: str):
    """The block's statement and the extents of its loops (spatial, reduction)."""
    realizes = []
    walk_nest(func, lambda r, ctx: realizes.append(r) if r.block.name_hint == block else None, lambda lp, ctx: ctx,
              None)
    (realize,) = realizes
    loops = list_loops(func, block)
    return (realize, math.prod(lp.extent for lp in loops if not lp.reduction),
            math.prod(lp.extent for lp in loops if lp.reduction))


def _one(xs, ws, **attrs):
    return _graph([(xs, ws, attrs)])


LOWER_CASES = {
    "t2d": (lambda: zoo.load("t2d"), "tconv", None),
    "t3d": (lambda: zoo.load("t3d"), "tconv", None),
    "t2d_alt_tiled": (lambda: zoo.load("t2d"), "tconv", "alt_tiled"),
    "t3d_alt_tiled": (lambda: zoo.load("t3d"), "tconv", "alt_tiled"),
    "t1d_k5_s3": (lambda: _one((1, 4, 9), (4, 8, 5), stride=3, padding=1, output_padding=2), "op0", None),
    "t2d_k3_s2": (lambda: _one((1, 8, 6, 6), (8, 4, 3, 3), stride=2, padding=1, output_padding=1), "op0", None),
    "t3d_mixed": (lambda: _one((1, 4, 3, 4, 5), (4, 4, 3, 4, 2), stride=(2, 2, 1), padding=(1, 1, 0)), "op0", None),
}


@pytest.mark.parametrize("case", sorted(LOWER_CASES))
def test_the_reduction_sums_only_the_phase_taps_without_conditionals(case):
    build, op, preset = LOWER_CASES[case]
    g = build()
    book = apply_actions(g, LayoutBook(), preset_actions(g, preset, op)) if preset else LayoutBook()
    prog = make_program(g, book)
    (kernel,) = [k for k in prog.plan.kernels if op in k.ops]
    func = prog.funcs[kernel.name]
    realize, spatial, reduction = _reduction_nest(func, op)
    assert _conditionals(realize.block.body) == [] and _conditionals(realize.predicate) == []
    if "tconv_input_pad" in list_blocks(func):  # the walk does see a guard: the pad stage's, once per element
        assert _conditionals(_reduction_nest(func, "tconv_input_pad")[0].block.body) == ["if_then_else"]
    node = g.node(op)
    shapes = [g.tensor(t).shape for t in node.inputs]
    executed, useful = spatial * reduction, g.flops(op) // 2
    assert executed == tconv_executed_macs(shapes, node.kwargs)
    nd = len(shapes[0]) - 2
    s, (k, cin, out) = _tup(node.kwargs.get("stride", 1), nd), (shapes[1][2:], shapes[0][1], g.tensor(op).shape)
    assert reduction == cin * math.prod(-(-kj // sj) for kj, sj in zip(k, s))  # C * prod(ceil(K/s)) taps
    if all(kj % sj == 0 for kj, sj in zip(k, s)):
        assert executed == useful
        assert "tconv_weight_pad" not in list_blocks(func)
    else:  # the extra multiply-adds are exactly those by the weight's zero taps
        assert executed > useful and "tconv_weight_pad" in list_blocks(func)
        p = _tup(node.kwargs.get("padding", 0), nd)
        per_dim = [sum(1 for y in range(out[2 + j]) for t in range(-(-k[j] // s[j]))
                       if (y + p[j]) % s[j] + s[j] * t < k[j]) for j in range(nd)]
        assert useful == out[0] * out[1] * cin * math.prod(per_dim)


def test_the_stride_2_cases_execute_a_quarter_and_an_eighth_of_the_old_taps():
    """The old form visited every tap of every output position (s^d times the phase taps)."""
    for model, nd in (("t2d", 2), ("t3d", 3)):
        g = zoo.load(model)
        node = g.node("tconv")
        x, w = (g.tensor(t).shape for t in node.inputs)
        old = math.prod(g.tensor("tconv").shape) * w[0] * math.prod(w[2:])
        assert tconv_executed_macs([x, w], node.kwargs) * 2 ** nd == old == 2 ** nd * g.flops("tconv") // 2


def test_flops_count_every_phase_tap_by_brute_force():
    for xs, ws, attrs in GRIDS[1] + GRIDS[2] + GRIDS[3]:
        g = _one(xs, ws, **attrs)
        nd = len(xs) - 2
        s, p, out = _tup(attrs["stride"], nd), _tup(attrs["padding"], nd), g.tensor("op0").shape
        # pairs (output position, tap) with the tap in the output's phase, dim by dim
        taps = [sum(1 for y in range(out[2 + j]) for k in range(ws[2 + j]) if (y + p[j] - k) % s[j] == 0)
                for j in range(nd)]
        assert g.flops("op0") == 2 * xs[0] * ws[0] * ws[1] * math.prod(taps), (xs, ws, attrs)


@pytest.mark.parametrize("attrs, message", [
    (dict(stride=2, output_padding=2), "output_padding .* smaller than the stride"),
    (dict(stride=0), "stride .* must be >= 1"),
    (dict(stride=1, padding=-1), "padding .* >= 0"),
    (dict(stride=1, padding=3), "leaves no output"),
])
def test_impossible_arguments_are_refused_in_one_line(attrs, message):
    with pytest.raises(GraphError, match=message) as e:
        _one((1, 2, 3, 3), (2, 2, 2, 2), **attrs)
    assert "\n" not in str(e.value)
