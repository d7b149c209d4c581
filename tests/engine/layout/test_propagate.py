"""Layout propagation (ALT Algorithm 1) on the paper's cases, checked end to end: where each
layout came from (the report), which conversions were inserted and why, how ops fuse into
kernels, what every buffer holds after a run, and the built program against the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.buffers import check_stored_buffers
from workbench.engine.models import zoo
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.primitives import Layout
from workbench.engine.layout.keys import apply_actions, apply_layout, layout_keys
from workbench.engine.build.lower import lower
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import Program
from workbench.engine.layout.propagate import plan_layouts, same_storage

TARGET = {"kind": "llvm", "num-cores": 2}


def origins(plan) -> dict[str, tuple[str, str]]:
    return {o.tensor: (o.how, o.layout) for o in plan.origins.values()}


def run_all_buffers(graph, book, seed=0):
    """Every kernel-written buffer against the reference in its stored layout; returns the plan."""
    return check_stored_buffers(graph, book, seed).plan


def test_conv_bias_relu_takes_the_conv_layout_with_no_conversion_inside():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "conv", factor=16))
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["conv"] == ("requested", "N C.o H W C.i")
    assert o["bias"] == ("propagated", "N C.o H W C.i") and o["relu"] == ("propagated", "N C.o H W C.i")
    assert plan.layout_of("bias").shape == plan.layout_of("relu").shape == (1, 4, 112, 112, 16)
    # the only conversion brings the graph output back to NCHW, after the fused conv+bias+relu kernel
    assert [(c.tensor, c.src, c.dst, c.fused) for c in plan.conversions] == [("relu", "relu", "relu@out", False)]
    assert "original layout" in plan.conversions[0].reason
    assert [k.ops for k in plan.kernels] == [("pad",), ("conv", "bias", "relu"), ()]
    assert plan.reads[("bias", "conv")] == "conv" and plan.reads[("relu", "bias")] == "bias"
    run_all_buffers(g, book)


def test_a_split_alone_stores_like_the_original_so_only_a_copy_into_the_output_shape_remains():
    """Rule 5. C -> C.o C.i keeps every element where it was: conv, bias and relu keep the split
    loops; the graph output relu is copied back into its original shape, nothing else converts."""
    g = zoo.load("r18_stem")
    book = apply_layout(g, LayoutBook(), "conv", "split", {"dim": 1, "factors": [4, 16]})
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["conv"] == ("requested", "N C.o C.i H W")
    assert o["bias"] == ("propagated", "N C.o C.i H W") and o["relu"] == ("propagated", "N C.o C.i H W")
    assert plan.layout_of("bias").shape == plan.layout_of("relu").shape == (1, 4, 16, 112, 112)
    assert [(c.dst, c.fused) for c in plan.conversions] == [("relu@out", False)]
    assert "original shape" in plan.conversions[0].reason
    # an identity reorder on the output: the same shape, so no copy at all
    book = apply_layout(g, LayoutBook(), "relu", "reorder", {"perm": [0, 1, 2, 3]})
    plan = plan_layouts(g, book)
    assert not plan.conversions and "graph output stays in it" in plan.origins["relu"].note
    run_all_buffers(g, book)


@pytest.mark.parametrize("preset, params", [("channels_last", {}), ("blocked", {"factor": 16}),
                                            ("blocked", {"factor": 32})])
def test_presets_on_the_conv_output_propagate_to_bias_and_relu(preset, params):
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, preset, "conv", **params))
    plan = plan_layouts(g, book)
    lay = plan.layout_of("conv")
    o = origins(plan)
    assert o["bias"] == o["relu"] == ("propagated", lay.label)
    assert [c.dst for c in plan.conversions] == ["relu@out"]
    run_all_buffers(g, book)


def test_an_advanced_layout_on_a_complex_output_is_not_propagated_and_is_converted():
    """Algorithm 1 line 1: a layout that changes data (here a padding split, 64 -> 3 x 24) is
    written by a conversion after the conv, and not copied onto the element-wise ops."""
    g = zoo.load("r18_stem")
    book = apply_layout(g, LayoutBook(), "conv", "split", {"dim": 1, "factors": [-1, 24]})
    plan = plan_layouts(g, book)
    assert plan.buffers["conv"].layout.is_identity and plan.buffers["conv@stored"].layout.shape[1:3] == (3, 24)
    conv = plan.conversions[0]
    assert (conv.src, conv.dst) == ("conv", "conv@stored") and "changes data" in conv.reason
    assert origins(plan)["bias"][0] == "default"
    run_all_buffers(g, book)


def test_the_pad_writes_the_convs_unfolded_input_itself():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16], ot=16, it=3))
    plan = plan_layouts(g, book)
    how, layout = origins(plan)["pad"]
    assert how == "written for consumer" and "H.t" in layout and "W.w" in layout
    pad_origin = plan.origins["pad"]
    assert pad_origin.source == "conv" and "writes conv's input layout itself" in pad_origin.note
    assert plan.reads[("conv", "pad")] == plan.writes["pad"] == "pad"  # conv reads what pad wrote
    assert plan.buffers["pad"].source == "op"
    assert [c.tensor for c in plan.conversions] == ["relu"]  # only the graph output comes back
    assert not any(k.conversion and k.conversion.tensor == "pad" for k in plan.kernels)
    # unfold of 230 rows into overlapping tiles of (4-1)*2+7 rows every 4*2 rows (Eq. 1), likewise columns
    th, tw = (4 - 1) * 2 + 7, (16 - 1) * 2 + 7
    tiles = (math.ceil((230 - th) / 8) + 1, math.ceil((230 - tw) / 32) + 1)
    assert plan.buffers["pad"].layout.shape == (1, *tiles, 1, th, tw, 3)
    assert plan.buffers["conv"].layout.shape == (1, 28, 7, 4, 4, 16, 16)
    assert origins(plan)["relu"] == ("propagated", plan.buffers["conv"].layout.label)
    run_all_buffers(g, book)


def test_two_consecutive_convs_get_a_conversion_between_them():
    b = GraphBuilder("cc")
    x = b.input("data", (1, 8, 10, 10))
    y = b.op("conv_a", "conv2d", x, b.const("conv_a.weight", (16, 8, 3, 3)), padding=1)
    b.op("conv_b", "conv2d", y, b.const("conv_b.weight", (16, 16, 3, 3)), padding=1)
    g = b.build()
    assert "conv_a@conv_b" in layout_keys(g)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "conv_a@conv_b", factor=8))
    plan = plan_layouts(g, book)
    assert len(plan.conversions) == 1
    conv = plan.conversions[0]
    assert (conv.tensor, conv.src, conv.dst) == ("conv_a", "conv_a", "conv_a@conv_b")
    assert not conv.fused  # between two complex ops: a kernel of its own
    assert plan.reads[("conv_b", "conv_a")] == "conv_a@conv_b"
    assert conv.reason == "conv_a and conv_b are both complex: tuned independently"
    assert [k.name for k in plan.kernels] == ["conv_a", "convert_conv_a_conv_b", "conv_b"]
    assert plan.buffers["conv_a"].layout.is_identity  # conv_a is not forced into conv_b's layout
    run_all_buffers(g, book)


def test_r18_block_a_laid_out_tensor_that_conv2_wants_otherwise_gets_a_fused_conversion():
    """The conversion relu1 -> relu1@conv2 runs in conv1's kernel: relu1, conv1's epilogue,
    writes conv2's layout directly (was: a kernel convert_relu1_conv2 between the two)."""
    g = zoo.load("r18_block")
    book = apply_layout(g, LayoutBook(), "relu1", "split", {"dim": 1, "factors": [4, 16]})
    book = apply_layout(g, book, "relu1@conv2", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    assert [(c.tensor, c.dst, c.fused, c.into) for c in plan.conversions] == [("relu1", "relu1@conv2", True, "relu1")]
    assert plan.conversions[0].reason == "relu1 already has layout N C.o C.i H W"
    assert plan.buffers["relu1@conv2"].layout.label == "N H W C"
    assert plan.reads[("conv2", "relu1")] == "relu1@conv2"
    assert [k.name for k in plan.kernels] == ["conv1", "conv2"]
    k1 = plan.kernels[0]
    assert k1.fused == plan.conversions and k1.outputs == ("relu1@conv2",)  # relu1 itself is never stored
    o = origins(plan)
    assert o["relu1"] == ("requested", "N C.o C.i H W")
    assert o["conv1_bias"] == ("pushed back", "N C.o C.i H W")
    rows = [r for r in plan.report() if r["how"] == "conversion"]
    assert rows == [{"tensor": "relu1", "layout": "N H W C", "how": "conversion", "from": "relu1",
                     "note": "relu1 already has layout N C.o C.i H W; fused: relu1 writes it directly", "fused": True}]
    run_all_buffers(g, book)


def test_r18_block_a_layout_on_conv1_stops_before_conv2_and_the_relu_converts():
    """Algorithm 1 line 3: conv1's layout crosses conv1_bias; relu1 feeds complex conv2, so it
    computes in conv1's loop order but writes the default layout: no conversion op."""
    g = zoo.load("r18_block")
    book = apply_layout(g, LayoutBook(), "conv1", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["conv1_bias"] == ("propagated", "N H W C")
    assert o["relu1"] == ("stop", "N C H W")
    assert "next op conv2 is complex" in plan.origins["relu1"].note
    assert not plan.conversions
    assert [k.ops for k in plan.kernels] == [("conv1", "conv1_bias", "relu1"), ("conv2", "conv2_bias", "add", "relu2")]
    run_all_buffers(g, book)


def test_an_elementwise_op_before_a_conv_writes_its_layout():
    g = zoo.load("r18_block")
    book = apply_layout(g, LayoutBook(), "conv1", "split", {"dim": 1, "factors": [4, 16]})
    book = apply_layout(g, book, "relu1@conv2", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["conv1_bias"][0] == "propagated"
    assert o["relu1"] == ("written for consumer", "N H W C")  # relu1 writes what conv2 wants
    assert o["conv2"] == ("default", "N C H W") and not plan.conversions
    run_all_buffers(g, book)


def fan_graph():
    """data -> relu -> two convs (ca, cb) reading relu."""
    b = GraphBuilder("fan")
    r = b.op("relu", "relu", b.input("data", (1, 8, 6, 6)))
    b.op("ca", "conv2d", r, b.const("ca.weight", (4, 8, 3, 3)))
    b.op("cb", "conv2d", r, b.const("cb.weight", (4, 8, 3, 3)))
    return b.build()


def test_a_simple_op_writes_one_consumers_wish_and_a_second_wish_gets_a_conversion():
    g = fan_graph()
    book = apply_layout(g, LayoutBook(), "relu@ca", "reorder", {"perm": [0, 2, 3, 1]})
    book = apply_layout(g, book, "relu@cb", "split", {"dim": 1, "factors": [2, 4]})
    plan = plan_layouts(g, book)
    assert origins(plan)["relu"] == ("written for consumer", "N H W C") and plan.origins["relu"].source == "ca"
    assert plan.buffers[plan.reads[("ca", "relu")]].layout.label == "N H W C"  # each conv reads what it asked for
    assert plan.buffers[plan.reads[("cb", "relu")]].layout.label == "N C.o C.i H W"
    assert [(c.tensor, c.dst, c.reason) for c in plan.conversions] == [
        ("relu", "relu@cb", "relu already has layout N H W C")]
    run_all_buffers(g, book)


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
    pushed = [r for r in rows if r["how"] == "pushed back"]
    assert pushed == [{"tensor": "conv2_bias", "layout": "N C.o C.i H W", "how": "pushed back", "from": "add",
                       "note": "add was laid out first; its element-wise input follows"}]
    run_all_buffers(g, book)


def test_multi_producer_rule_takes_the_first_inputs_layout():
    """add reads conv2_bias (laid out through conv2) and data (laid out differently): the first wins."""
    g = zoo.load("r18_block")
    book = apply_layout(g, LayoutBook(), "conv2", "split", {"dim": 1, "factors": [4, 16]})
    book = apply_layout(g, book, "data", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["add"] == ("propagated", "N C.o C.i H W") and plan.origins["add"].source == "conv2_bias"
    assert "first of the laid-out inputs conv2_bias, data" in plan.origins["add"].note
    assert o["relu2"] == ("propagated", "N C.o C.i H W")
    # the input arrives in NCHW: a kernel converts it first; relu2, the graph output, is split
    # alone (it stores like NCHW): only copied back into its shape
    assert [(c.tensor, c.dst, c.fused) for c in plan.conversions] == [("data", "data@stored", False),
                                                                      ("relu2", "relu2@out", False)]
    assert plan.conversions[0].reason == "graph input arrives in its original layout"
    assert plan.kernels[0].conversion is plan.conversions[0]
    # the fusion goes on across the converted input (was: add, relu2 in a kernel of their own)
    assert [k.ops for k in plan.kernels] == [(), ("conv1", "conv1_bias", "relu1"), ("conv2", "conv2_bias", "add", "relu2"),
                                             ()]
    run_all_buffers(g, book)


def test_mv2_block_residual_add_takes_the_project_layout():
    g = zoo.load("mv2_block")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "project", factor=8))
    plan = plan_layouts(g, book)
    o = origins(plan)
    assert o["project_bias"] == o["add"] == ("propagated", "N C.o H W C.i")
    assert [c.dst for c in plan.conversions] == ["add@out"]
    run_all_buffers(g, book, seed=3)


def test_report_names_origins_and_reasons_for_every_tensor():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv"))
    rows = plan_layouts(g, book).report()
    by = {(r["tensor"], r["how"]): r for r in rows}
    assert {r["tensor"] for r in rows} == set(g.tensors)
    assert by[("conv", "requested")]["layout"] == "N H.o W.o C.o H.i W.i C.i"
    assert by[("pad", "written for consumer")]["from"] == "conv"
    assert by[("bias", "propagated")]["from"] == "conv" and "across element-wise bias" in by[("bias", "propagated")]["note"]
    assert by[("relu", "propagated")]["from"] == "bias"
    assert by[("relu", "conversion")]["note"] == "graph outputs come back in their original layout"
    assert by[("data", "default")]["layout"] == "N C H W"
    assert by[("conv.weight", "requested")]["layout"] == "O.o I.o H W I.i O.i"


def test_an_input_in_a_new_layout_is_converted_by_a_kernel():
    g = zoo.load("gmm", m=32, n=32, k=32)
    book = apply_layout(g, LayoutBook(), "a", "split", {"dim": 1, "factors": [2, 16]})
    assert not plan_layouts(g, book).conversions  # a split alone stores like the original (rule 5)
    book = apply_layout(g, book, "a", "reorder", {"perm": [1, 0, 2]})
    plan = plan_layouts(g, book)
    assert [(c.tensor, c.fused) for c in plan.conversions] == [("a", False)]
    run_all_buffers(g, book)


def test_constants_are_converted_ahead_of_time_not_by_kernels():
    g = zoo.load("r18_stem")
    book = apply_layout(g, LayoutBook(), "conv.weight", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    assert not any(c.tensor == "conv.weight" for c in plan.conversions)
    assert plan.buffers["conv.weight"].source == "const" and plan.buffers["conv.weight"].layout.shape == (64, 7, 7, 3)
    run_all_buffers(g, book)


def test_an_empty_book_is_the_default_plan():
    g = zoo.load("r18_block")
    plan = plan_layouts(g, LayoutBook())
    assert not plan.conversions and all(o.how == "default" for o in plan.origins.values())
    assert all(b.layout.is_identity for b in plan.buffers.values())
    assert [k.ops for k in plan.kernels] == [("conv1", "conv1_bias", "relu1"), ("conv2", "conv2_bias", "add", "relu2")]


########## Rule 5: layouts that store like the original are never converted ##########

def _small_conv_graph():
    b = GraphBuilder("small")
    x = b.input("data", (1, 8, 7, 5))
    y = b.op("conv", "conv2d", x, b.const("conv.weight", (6, 8, 3, 3)), padding=1)
    r = b.op("relu", "relu", y)
    b.op("conv2", "conv2d", r, b.const("conv2.weight", (4, 6, 3, 3)), padding=1)
    return b.build()


# (primitives) on a rank-4 tensor whose dim 1 has extent 8 or 6, dim 2 7, dim 3 5: all store alike
IDENTITY_LAYOUTS = {
    "identity reorder": [("reorder", {"perm": [0, 1, 2, 3]})],
    "split by the full extent": [("split", {"dim": 1, "factors": [1, -1]})],
    "split into the full extent": [("split", {"dim": 2, "factors": [7, 1]})],
    "split alone": [("split", {"dim": 3, "factors": [-1, 5]}), ("split", {"dim": 1, "factors": [2, -1]})],
    "fuse": [("fuse", {"dims": [2, 3]})],
    "fuse then split back": [("fuse", {"dims": [1, 2]}), ("split", {"dim": 1, "factors": [-1, 7]})],
    "unit dim moved": [("reorder", {"perm": [1, 0, 2, 3]})],
    "unfold into one full tile": [("unfold", {"dim": 2, "tile": 7, "stride": 7})],
}


@pytest.mark.parametrize("name", list(IDENTITY_LAYOUTS))
@pytest.mark.parametrize("key", ["data@conv", "conv"] + [pytest.param(k, marks=pytest.mark.slow)  # fast lane: two keys
                                                          for k in ("data", "relu", "relu@conv2", "conv2")])
def test_identity_layouts_produce_zero_conversion_ops(name, key):
    g = _small_conv_graph()
    book = LayoutBook()
    for prim, args in IDENTITY_LAYOUTS[name]:
        book = apply_layout(g, book, key, prim, args)
    assert book.get(key) is not None and not book.get(key).is_identity  # a layout was recorded
    plan = plan_layouts(g, book)
    if key in g.outputs and book.get(key).shape != g.tensors[key].shape:
        # the caller gets the output buffer as stored: only a copy into the original shape
        assert [(c.dst, "original shape" in c.reason) for c in plan.conversions] == [(f"{key}@out", True)]
    else:
        assert not plan.conversions, [(c.tensor, c.dst) for c in plan.conversions]
        assert not any(k.conversion for k in plan.kernels)
    if key == "data" or (key in g.outputs and not plan.conversions):
        assert plan.buffers[key].layout.is_identity  # the caller's array as it is
    run_all_buffers(g, book)


def test_same_storage_compares_what_is_stored_not_the_primitive_lists():
    nchw = Layout.identity((2, 64, 5, 7), "NCHW")
    blocked = nchw.apply("split", dim=1, factors=[4, 16]).apply("reorder", perm=[0, 1, 3, 4, 2])
    assert same_storage(nchw, nchw.apply("split", dim=1, factors=[4, 16]))
    assert same_storage(blocked, blocked.apply("reorder", perm=[0, 1, 2, 3, 4]))
    assert same_storage(blocked.apply("fuse", dims=[2, 3]), blocked)
    assert not same_storage(nchw, blocked)
    assert not same_storage(nchw, nchw.apply("reorder", perm=[0, 2, 3, 1]))
    assert not same_storage(nchw, nchw.apply("pad", dim=2, before=1, after=0))  # more elements
    assert not same_storage(nchw, nchw.apply("split", dim=2, factors=[-1, 4]))  # 5 -> 2 x 4: padding
    # the same padding and the same order store alike
    padded = nchw.apply("pad", dim=3, before=1, after=1)
    assert same_storage(padded, padded.apply("split", dim=3, factors=[1, 9]))
    assert not same_storage(padded, nchw.apply("pad", dim=3, before=2, after=0))
    # two unfolds with overlapping tiles: the duplicates must sit in the same places
    unf = nchw.apply("unfold", dim=3, tile=3, stride=2)
    assert same_storage(unf, unf.apply("reorder", perm=[0, 1, 2, 3, 4]))
    # 7 -> 2 tiles of 4 (one duplicate) vs 7 + 1 zero: the same size, not the same contents
    assert not same_storage(nchw.apply("unfold", dim=3, tile=4, stride=3), nchw.apply("pad", dim=3, before=0, after=1))


def test_a_consumer_wish_that_stores_like_the_producers_layout_is_read_as_it_is():
    g = zoo.load("r18_block")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "relu1", factor=16))
    book = apply_actions(g, book, preset_actions(g, "blocked", "relu1@conv2", factor=16))
    book = apply_layout(g, book, "relu1@conv2", "fuse", {"dims": [2, 3]})  # N C.o (H*W) C.i: the same order
    plan = plan_layouts(g, book)
    assert not plan.conversions and plan.reads[("conv2", "relu1")] == "relu1"


########## Rule 6: fused conversions ##########

def _outputs_equal(graph, book):
    """Build the plan with and without fused conversions; both match the reference and each other."""
    values = graph.random_inputs(1)
    progs = []
    for fuse in (False, True):
        plan = plan_layouts(graph, book, fuse=fuse)
        progs.append(Program(plan, lower(plan)))
    got = [p.build(TARGET).run(values) for p in progs]
    for t in graph.outputs:
        np.testing.assert_allclose(got[1][t], got[0][t], rtol=1e-5, atol=1e-5)
    assert all(p.build(TARGET).verify(values).ok for p in progs)
    return [p.plan for p in progs]


def test_a_fused_conversion_program_equals_the_unfused_one_with_one_kernel_fewer():
    g = zoo.load("r18_block")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "relu1", factor=16))
    book = apply_layout(g, book, "relu1@conv2", "reorder", {"perm": [0, 2, 3, 1]})
    unfused, fused = _outputs_equal(g, book)
    assert len(fused.kernels) == len(unfused.kernels) - 1
    assert [k.name for k in unfused.kernels] == ["conv1", "convert_relu1_conv2", "conv2"]
    assert [k.name for k in fused.kernels] == ["conv1", "conv2"]
    assert [c.fused for c in unfused.conversions] == [False] and [c.fused for c in fused.conversions] == [True]
    assert [r["fused"] for r in fused.report() if r["how"] == "conversion"] == [True]


def test_an_epilogue_writes_a_padded_unfolded_input_with_its_halos():
    """relu1 has a layout of its own and conv2 wants ALT's tiled input (pad + overlapping
    unfold + split): conv1's kernel writes both, halos duplicated and padding zero."""
    g = zoo.load("r18_block")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "relu1", factor=16))
    book = apply_actions(g, book, preset_actions(g, "alt_tiled", "conv2", tiles=[4, 8], ot=16, it=16))
    plan = plan_layouts(g, book)
    conv = next(c for c in plan.conversions if c.tensor == "relu1")
    assert conv.fused and conv.into == "relu1" and plan.buffers[conv.dst].layout.advanced
    assert not any(k.conversion and k.conversion.tensor == "relu1" for k in plan.kernels)
    assert conv.dst in plan.kernels[0].outputs
    run_all_buffers(g, book)


def test_fusion_goes_on_across_a_conversion_after_a_complex_op():
    """A padding split on the conv output is written by a conversion (the conv does not write
    it), but in the conv's kernel: bias and relu go on reading it there."""
    g = zoo.load("r18_stem")
    book = apply_layout(g, LayoutBook(), "conv", "split", {"dim": 1, "factors": [-1, 24]})
    unfused, fused = _outputs_equal(g, book)
    assert [k.ops for k in unfused.kernels] == [("pad",), ("conv",), (), ("bias",), ("relu",)]
    assert [k.ops for k in fused.kernels] == [("pad",), ("conv", "bias", "relu")]
    assert fused.kernels[1].fused == fused.conversions and fused.kernels[1].outputs == ("relu",)


def test_a_simple_op_kernel_writes_a_second_wish_itself():
    g = fan_graph()
    book = apply_layout(g, LayoutBook(), "relu@ca", "reorder", {"perm": [0, 2, 3, 1]})
    book = apply_actions(g, book, preset_actions(g, "blocked", "relu@cb", factor=4))
    unfused, fused = _outputs_equal(g, book)
    assert [k.name for k in fused.kernels] == ["relu", "ca", "cb"]
    assert fused.kernels[0].outputs == ("relu", "relu@cb")  # ca reads relu as written, cb its own layout
    assert len(unfused.kernels) == 4


def test_conversions_of_graph_inputs_and_outputs_and_between_complex_ops_stay_kernels():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16], ot=16, it=3))
    book = apply_layout(g, book, "data", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    assert {c.dst: c.fused for c in plan.conversions} == {"data@stored": False, "relu@out": False}
    assert [k.name for k in plan.kernels] == ["convert_data_stored", "pad", "conv", "convert_relu_out"]


def test_a_max_pool_writes_zero_padding_into_the_tiles_of_the_conv_after_it():
    """ResNet-18's stem: a max pool (its own -inf padding) feeds a conv with zero padding. When
    the conv takes ALT's tiled input the pool writes those tiles directly, and the halo outside
    the image must hold the conv's zeros, not the max pool's identity (-3e38)."""
    b = GraphBuilder("pool_conv")
    x = b.input("data", (1, 8, 18, 18))
    p = b.op("pool", "pool2d", x, kernel=3, stride=2, padding=1, mode="max")
    w = b.const("conv.weight", (16, 8, 3, 3), "OIHW")
    b.op("conv", "conv2d", p, w, padding=1)
    g = b.build()
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[3, 9], ot=16, it=8))
    plan = run_all_buffers(g, book)
    pool = next(k for k in plan.kernels if k.ops == ("pool",))
    assert plan.buffers[pool.outputs[0]].layout.advanced  # the pool wrote the tiles itself
