"""Expression ops as ops of the library (``engine.expr.op``): layout primitives on their tensors
propagate (ALT's rules by kind) and the program still matches the interpreter buffer by buffer; a
complex expression op takes an input view, its expert schedule and loop primitives."""

from __future__ import annotations

import pytest

from tests.buffers import check_stored_buffers
from workbench.engine.models import zoo
from workbench.engine.layout.book import LayoutBook
from workbench.engine.ir.expr import add_expr_op
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.keys import apply_actions, apply_layout, layout_keys
from workbench.engine.loops.primitives import list_blocks, list_loops, loop_step
from workbench.engine.layout.propagate import plan_layouts
from workbench.engine.session.session import new_session, replay
from workbench.engine.base.step import Step

CONV_ACT = """
input inp[1, 3, 11, 9]
input w[8, 3, 3, 2]
input b[8]
conv: out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]
act: out[n, k, y, x] = max(conv[n, k, y, x], 0) * b[k]
"""


def _conv_act():
    b = GraphBuilder("conv_act")
    for name, shape in (("inp", (1, 3, 11, 9)), ("w", (8, 3, 3, 2)), ("b", (8,))):
        b.input(name, shape)
    add_expr_op(b, "conv", "out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]")
    add_expr_op(b, "act", "out[n, k, y, x] = max(conv[n, k, y, x], 0) * b[k]")
    return b.build()


def test_a_split_of_the_conv_output_propagates_to_the_elementwise_op_and_verifies():
    g = _conv_act()
    assert [g.node(n).kind for n in ("conv", "act")] == ["complex", "elementwise"]
    book = apply_layout(g, LayoutBook(), "conv", "split", {"dim": 1, "factors": [2, 4]})
    book = apply_layout(g, book, "conv", "reorder", {"perm": [0, 1, 3, 4, 2]})  # K blocked innermost
    plan = plan_layouts(g, book)
    assert plan.layout_of("conv").shape == plan.layout_of("act").shape == (1, 2, 5, 4, 4)
    assert plan.origins["act"].how == "propagated"
    assert [k.ops for k in plan.kernels if k.ops] == [("conv", "act")]  # the epilogue fuses into the conv
    assert [c.dst for c in plan.conversions] == ["act@out"]  # the graph output back to its own layout
    check_stored_buffers(g, book)


def test_a_complex_expression_op_takes_layouts_for_its_inputs():
    g = _conv_act()
    assert {"inp@conv", "w@conv"} <= set(layout_keys(g))
    book = apply_actions(g, LayoutBook(), [Step.make("layout", "w@conv", "split", dim=0, factors=[2, 4]),
                                           Step.make("layout", "w@conv", "reorder", perm=[0, 2, 3, 4, 1])])
    plan = plan_layouts(g, book)
    assert plan.buffers[plan.reads[("conv", "w")]].layout.shape == (2, 3, 3, 2, 4)
    check_stored_buffers(g, book)


def test_a_layout_on_an_elementwise_output_is_pushed_back_and_a_max_pool_stops_it():
    b = GraphBuilder("ew")
    b.input("x", (6, 10))
    add_expr_op(b, "e", "out[i, j] = exp(x[i, j])")
    add_expr_op(b, "t", "out[i, j] = e[i, j] * 2.0")
    add_expr_op(b, "m", "out[i] max= t[i, j]")
    g = b.build()
    book = apply_layout(g, LayoutBook(), "t", "split", {"dim": 1, "factors": [2, 5]})
    plan = plan_layouts(g, book)
    assert plan.layout_of("e").shape == plan.layout_of("t").shape == (6, 2, 5)
    assert plan.origins["e"].how == "pushed back"
    assert plan.layout_of("m").is_identity
    check_stored_buffers(g, book)


@pytest.mark.slow
def test_a_session_on_an_expr_file_takes_its_expert_schedule_and_loop_primitives(tmp_path):
    path = tmp_path / "conv_act.expr"
    path.write_text(CONV_ACT)
    spec, graph = zoo.file_model(str(path))
    state = replay(new_session(spec, "conv_act"))
    assert graph.node("conv").type == "expr_complex"
    state = state.push(Step.make("layout", "conv", "split", dim=1, factors=[2, 4]))
    expert = state.with_expert_schedules()
    kernel = expert.home_kernel("conv")
    assert len(expert.session.steps) > len(state.session.steps)  # its expert steps, as loop steps
    assert expert.kernel_schedule(kernel).kind != "default"
    assert expert.scheduled_program().build().verify().ok
    # a loop primitive by hand on the unscheduled kernel: parallel on its outermost loop
    func = state.program.funcs[kernel]
    block = list_blocks(func)[0]
    outer = list_loops(func, block)[0].name
    laid = state.push(loop_step("parallel", kernel, block=block, loop=outer))
    assert laid.kernel_schedule(kernel).kind != "default"
    assert laid.scheduled_program().build().verify().ok


def test_an_unfolded_input_of_an_expression_conv_is_read_tile_by_tile():
    """ALT's Eq. 1: output rows in tiles of T = 2 read input tiles of (T - 1) * 2 + 3 = 5 rows every
    T * 2 = 4; the conv's read 2*y + r is a sliding window, so each output tile reads one input tile."""
    b = GraphBuilder("unfold")
    b.input("inp", (1, 3, 11, 9))
    b.input("w", (4, 3, 3, 3))
    add_expr_op(b, "conv", "out[n, k, y, x] += inp[n, c, 2*y + r, x + s] * w[k, c, r, s]")
    g = b.build()
    book = apply_layout(g, LayoutBook(), "inp@conv", "unfold", {"dim": 2, "tile": 5, "stride": 4})
    prog = check_stored_buffers(g, book)
    assert prog.plan.buffers[prog.plan.reads[("conv", "inp")]].layout.shape == (1, 3, 3, 5, 9)
    read = next(ln for ln in str(prog.funcs["conv"]).splitlines() if "inp_conv[" in ln and "T.reads" not in ln)
    assert "inp_conv[0, v_c, v_i2 // 2, v_i2 % 2 * 2 + v_r, v_i3 + v_s]" in read  # tile y // 2, row in it


@pytest.mark.tuning
def test_loop_tuning_of_an_expr_session_gives_a_network_that_still_verifies(tmp_path):
    from workbench.engine.tuning.options import TuneOptions
    from workbench.engine.tuning.stages import tune_network

    path = tmp_path / "conv_act.expr"
    path.write_text(CONV_ACT)
    spec, _ = zoo.file_model(str(path))
    tuned = tune_network(new_session(spec, "conv_act"), "loop", 4, tmp_path / "work", TuneOptions(keep_faster=False))
    state = replay(tuned.session)
    kernel = state.home_kernel("conv")
    assert state.kernel_schedule(kernel).kind != "default"
    assert state.scheduled_program().build().verify().ok
