"""The joint stage on an expression op that is a contraction (``joint``): its layout
space blocks the op's output along one dim, and a tiny joint tuning scores such a layout, tunes
its loops, and leaves a program that still computes the op."""

from __future__ import annotations

import pytest

from workbench.engine.base.errors import TuneError
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import DEFAULT_TARGET
from workbench.engine.ir.expr import expr_graph, read_expr
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.loops.primitives import apply_trace_json
from workbench.engine.tuning.joint import Candidate, joint_tune, layout_space
from workbench.engine.tuning.options import TuneOptions

CONV = """input inp[1, 8, 10, 9]
input w[16, 8, 3, 3]
conv: out[n, k, y, x] += inp[n, c, y + r, x + s] * w[k, c, r, s]
act: out[n, k, y, x] = tanh(conv[n, k, y, x])
"""


def graph():
    return expr_graph(read_expr(CONV), "conv")


def test_an_expression_contraction_has_a_space_of_output_blockings():
    g = graph()
    assert g.node("conv").type == "expr_complex"
    space = layout_space(g, "conv")
    assert space[0] == Candidate(None)
    assert {(c.preset, c.kwargs["dim"], c.kwargs["factor"]) for c in space[1:]} == {
        ("blocked", 1, f) for f in (4, 8, 16)} | {("blocked", 2, 4), ("blocked", 2, 8)}
    assert {c.kwargs["factor"] for c in layout_space(g, "conv", lanes=8)[1:]} == {8, 16}  # whole registers
    with pytest.raises(TuneError, match="not a complex op"):
        layout_space(g, "act")


def test_a_joint_tuning_of_an_expression_contraction_keeps_it_correct(tmp_path):
    g = graph()
    options = TuneOptions(seed=1, joint_fraction=0.67, per_candidate=1)
    res = joint_tune(g, LayoutBook(), "conv", DEFAULT_TARGET, tmp_path / "wd", 4, options)
    assert len(res.scores) >= 2 and res.scores[0][0] == Candidate(None)
    assert any(c.preset == "blocked" for c, _ in res.scores) and res.best_ms > 0
    book = apply_actions(g, LayoutBook(), res.best.actions(g, "conv"))
    prog = make_program(g, book)
    prog = prog.with_funcs({"conv": apply_trace_json(prog.funcs["conv"], res.trace).mod["main"]})
    assert prog.build().verify().ok
    assert res.step().to_json()["layouts"] == ([res.best.step("conv").to_json()] if res.best.preset else [])
