"""Layout propagation (ALT Algorithm 1) on the paper's cases, checked end to end: the plan's
report, its conversions and kernels, and the built program against the reference."""

from __future__ import annotations

import math

import pytest

from workbench.engine import zoo
from workbench.engine.graph import GraphBuilder
from workbench.engine.layout import LayoutBook
from workbench.engine.layouts import apply_actions, apply_layout, preset_actions
from workbench.engine.program import make_program
from workbench.engine.propagate import plan_layouts

TARGET = {"kind": "llvm", "num-cores": 2}


def origins(plan) -> dict[str, tuple[str, str]]:
    return {o.tensor: (o.how, o.layout) for o in plan.origins.values()}


def verified(graph, book) -> None:
    assert make_program(graph, book).build(TARGET).verify().ok


def test_conv_bias_relu_takes_the_conv_layout_with_no_conversion_inside():
    g = zoo.load("r18_stem")
    book = apply_layout(g, LayoutBook(), "conv", "split", {"dim": 1, "factors": [4, 16]})
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["conv"] == ("requested", "N C.o C.i H W")
    assert o["bias"] == ("propagated", "N C.o C.i H W") and o["relu"] == ("propagated", "N C.o C.i H W")
    # the only conversion brings the graph output back to NCHW, after the fused conv+bias+relu kernel
    assert [(c.tensor, c.src) for c in plan.conversions] == [("relu", "relu")]
    assert [k.ops for k in plan.kernels if k.ops] == [("pad",), ("conv", "bias", "relu")]
    verified(g, book)


def test_the_pad_writes_the_convs_unfolded_input_itself():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16], ot=16, it=3))
    plan = plan_layouts(g, book)
    how, layout = origins(plan)["pad"]
    assert how == "written for consumer" and "H.t" in layout and "W.w" in layout
    assert plan.buffers[plan.reads[("conv", "pad")]].source == "op"  # conv reads what pad wrote: no conversion
    assert [c.tensor for c in plan.conversions] == ["relu"]
    # unfold of 230 rows into overlapping tiles of (4-1)*2+7 rows every 4*2 rows (Eq. 1), same for columns
    th, tw = (4 - 1) * 2 + 7, (16 - 1) * 2 + 7
    tiles = (math.ceil((230 - th) / 8) + 1, math.ceil((230 - tw) / 32) + 1)
    assert plan.buffers[plan.writes["pad"]].layout.shape == (1, *tiles, 1, th, tw, 3)
    verified(g, book)


def test_two_consecutive_convs_get_a_conversion_between_them():
    b = GraphBuilder("cc")
    x = b.input("data", (1, 8, 10, 10))
    y = b.op("conv_a", "conv2d", x, b.const("conv_a.weight", (16, 8, 3, 3)), padding=1)
    b.op("conv_b", "conv2d", y, b.const("conv_b.weight", (16, 16, 3, 3)), padding=1)
    g = b.build()
    book = apply_layout(g, LayoutBook(), "conv_a@conv_b", "split", {"dim": 1, "factors": [2, 8]})
    plan = plan_layouts(g, book)
    assert len(plan.conversions) == 1
    conv = plan.conversions[0]
    assert conv.tensor == "conv_a" and plan.reads[("conv_b", "conv_a")] == conv.dst
    assert "complex" in conv.reason or "conv" in conv.reason
    assert any(k.conversion is conv for k in plan.kernels)
    verified(g, book)


def test_an_elementwise_op_before_a_conv_writes_its_layout_and_stops_propagation():
    g = zoo.load("r18_block")
    book = apply_layout(g, LayoutBook(), "conv1", "split", {"dim": 1, "factors": [4, 16]})
    book = apply_layout(g, book, "relu1@conv2", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["conv1_bias"][0] == "propagated"
    assert o["relu1"] == ("written for consumer", "N H W C")  # relu1 writes what conv2 wants
    assert o["conv2"] == ("default", "N C H W") and not plan.conversions
    verified(g, book)


def test_multi_producer_rule_pushes_a_layout_back_onto_the_residual_branch():
    g = zoo.load("r18_block")
    book = apply_layout(g, LayoutBook(), "add", "split", {"dim": 1, "factors": [4, 16]})
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["add"] == ("requested", "N C.o C.i H W")
    assert o["conv2_bias"] == ("pushed back", "N C.o C.i H W")  # its element-wise producer follows
    assert o["relu2"] == ("propagated", "N C.o C.i H W")
    assert o["data"] == ("default", "N C H W")  # a graph input is read as it is
    rows = plan.report()
    assert {"tensor", "layout", "how", "from", "note"} <= set(rows[0])
    assert any(r["how"] == "pushed back" and r["from"] == "add" and r["note"] for r in rows)
    verified(g, book)


def test_an_input_in_a_new_layout_is_converted_by_a_kernel():
    g = zoo.load("gmm", m=32, n=32, k=32)
    book = apply_layout(g, LayoutBook(), "a", "split", {"dim": 1, "factors": [2, 16]})
    plan = plan_layouts(g, book)
    assert [c.tensor for c in plan.conversions] == ["a"]
    verified(g, book)


@pytest.mark.parametrize("preset, target", [("channels_last", "conv"), ("blocked", "conv")])
def test_presets_propagate_without_breaking_the_numbers(preset, target):
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, preset, target))
    plan = plan_layouts(g, book)
    assert origins(plan)["relu"][0] == "propagated"
    verified(g, book)
