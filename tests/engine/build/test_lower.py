"""Lowering: every zoo model, in its default layouts and under every preset that applies to it
(on all of its complex ops), builds with LLVM and matches the reference on random inputs; every
buffer a kernel writes holds the reference in its stored layout (padding zero); PrimFuncs are
written over stored shapes; splits that pad are masked out of the numbers."""

from __future__ import annotations

import pytest

from tests.buffers import check_stored_buffers
from workbench.engine.models import zoo
from workbench.engine.base.errors import LayoutError
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions, apply_layout
from workbench.engine.layout.presets import preset_actions
from workbench.engine.base.step import Step
from workbench.engine.build.lower import lower_kernel
from workbench.engine.build.program import make_program

TARGET = {"kind": "llvm", "num-cores": 2}
#: the 1024^3 GMM default is slow to run unscheduled; 50 rows also make nkn's m=16 pad
SMALL = {"gmm": {"m": 50, "n": 48, "k": 32}}
PRESETS = {"conv": ("channels_last", "blocked", "alt_tiled"), "matmul": ("blocked", "nkn")}
#: models whose preset cases take seconds each: the fast lane (``make test-fast``) lowers them in
#: their default layouts only
HEAVY = {"bert_tiny_layer", "c3d", "mv2_block", "r18_block"}


def _complex(g, family):
    return [n.name for n in g.nodes if n.kind == "complex" and n.type.startswith(family)]


def _cases():
    """(model, None) and (model, preset) for each preset with ops to apply to."""
    for model in sorted(zoo.MODELS):
        g = zoo.load(model, **SMALL.get(model, {}))
        yield model, None
        for family, presets in PRESETS.items():
            if _complex(g, family):
                yield from ((model, p) for p in presets)


def _book(g, preset):
    """The preset on every complex op it applies to (its output tensor for tensor presets)."""
    book = LayoutBook()
    if preset is None:
        return book
    family = "matmul" if preset == "nkn" or not _complex(g, "conv") else "conv"
    for op in _complex(g, family):
        book = apply_actions(g, book, preset_actions(g, preset, op))
    return book


@pytest.mark.parametrize("model, preset", [pytest.param(m, p, marks=pytest.mark.slow) if m in HEAVY and p else (m, p)
                                           for m, p in _cases()], ids=lambda v: str(v))
def test_model_under_preset_matches_the_reference(model, preset):
    g = zoo.load(model, **SMALL.get(model, {}))
    book = _book(g, preset)
    prog = check_stored_buffers(g, book)
    if preset is not None:  # the preset did change the program's layouts
        assert any(not b.layout.is_identity for b in prog.plan.buffers.values())
        assert prog.plan.book.layouts


def test_primfuncs_are_written_over_stored_shapes():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16], ot=16, it=3))
    prog = make_program(g, book)
    plan = prog.plan
    kernel = next(k for k in plan.kernels if k.head == "conv")
    func = lower_kernel(plan, kernel)
    shapes = [tuple(int(x) for x in p.shape) for p in func.params]  # buffer parameters
    want = [plan.buffers[b].layout.shape for b in kernel.inputs + kernel.outputs]
    assert shapes == want
    assert (1, 28, 7, 4, 4, 16, 16) in shapes  # the tiled output
    assert (4, 1, 7, 7, 3, 16) in shapes  # the weight, converted ahead of time
    assert set(prog.funcs) == {k.name for k in plan.kernels}
    assert prog.flops["conv"] == g.flops("conv") + g.flops("bias") + g.flops("relu")


def L(key, prim, args):
    return Step.make("layout", key, prim, **args)


def test_a_padding_split_masks_the_padding_out_of_reductions():
    """64 output channels split by 24 pad to 72, the 3 input channels split by 2 pad to 4: the
    padding channels must not leak into the sums, and hold zeros where they are stored."""
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), [L("conv", "split", {"dim": 1, "factors": [-1, 24]}),
                                          L("pad@conv", "split", {"dim": 1, "factors": [-1, 2]}),
                                          L("conv.weight", "split", {"dim": 1, "factors": [-1, 2]})])
    prog = check_stored_buffers(g, book, seed=2)
    assert any(buf.layout.shape[1:3] == (3, 24) for buf in prog.plan.buffers.values() if buf.tensor == "conv")
    assert prog.plan.buffers["pad"].layout.shape == (1, 2, 2, 230, 230)


@pytest.mark.parametrize("where", ["output", "elementwise", "reduction"])
def test_padding_splits_on_a_gmm_give_correct_numbers(where):
    b = GraphBuilder("mm")
    x = b.input("x", (19, 13))
    y = b.op("mm", "matmul", x, b.const("mm.weight", (13, 11)))
    b.op("act", "relu", b.op("mm_bias", "bias_add", y, b.const("mm_bias.bias", (11,)), axis=-1))
    g = b.build()
    actions = {
        "output": [L("mm", "split", {"dim": 0, "factors": [-1, 4]}), L("mm", "split", {"dim": 2, "factors": [-1, 3]})],
        "elementwise": [L("mm_bias", "split", {"dim": 1, "factors": [-1, 4]}),
                        L("mm_bias", "reorder", {"perm": [1, 0, 2]})],
        "reduction": [L("x@mm", "split", {"dim": 1, "factors": [-1, 5]}),
                      L("mm.weight", "split", {"dim": 0, "factors": [-1, 5]})],
    }[where]
    book = apply_actions(g, LayoutBook(), actions)
    check_stored_buffers(g, book, seed=4)


def test_alt_tiled_with_tiles_that_do_not_divide():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[5, 6], ot=24, it=2))
    prog = check_stored_buffers(g, book, seed=5)
    assert prog.plan.buffers["conv@stored"].layout.shape == (1, 23, 19, 3, 5, 6, 24)


def test_nkn_that_pads_on_a_gmm():
    g = zoo.load("gmm", m=50, n=40, k=24)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "nkn", "gmm", m=16, n=16))
    prog = check_stored_buffers(g, book, seed=6)
    assert any(b.layout.shape == (4, 3, 16, 16) for b in prog.plan.buffers.values() if b.tensor == "gmm")


def test_batch_option_lowers_too():
    g = zoo.load("r18_block", batch=2)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "conv1", factor=32))
    check_stored_buffers(g, book, seed=7)


def test_a_preset_that_does_not_fit_is_refused_with_its_reason():
    g = zoo.load("gmm", m=64, n=48, k=32)
    with pytest.raises(LayoutError, match="alt_tiled applies to convolutions; gmm is GMM"):
        preset_actions(g, "alt_tiled", "gmm")
    with pytest.raises(LayoutError, match="nkn applies to matmul; conv is C2D"):
        preset_actions(zoo.load("r18_stem"), "nkn", "conv")
    with pytest.raises(LayoutError, match="unknown preset 'nhwc'"):
        preset_actions(g, "nhwc", "gmm")
    with pytest.raises(LayoutError, match="alt_tiled on conv needs 2 tile sizes, got \\[4, 4, 4\\]"):
        preset_actions(zoo.load("r18_stem"), "alt_tiled", "conv", tiles=[4, 4, 4])


def test_an_identity_reorder_still_computes_the_same_numbers():
    g = zoo.load("r18_stem")
    book = apply_layout(g, LayoutBook(), "conv", "reorder", {"perm": [0, 1, 2, 3]})
    prog = check_stored_buffers(g, book)
    assert prog.plan.layout_of("relu").shape == (1, 64, 112, 112)


def _reduction_text(func) -> str:
    from workbench.engine.schedules.tiling.steps import main_block
    from workbench.engine.loops.primitives import block_nest

    return str(block_nest(func, main_block(func))[0].block.body)


@pytest.mark.parametrize("preset", [None, "alt_tiled"])
def test_a_padded_conv_tests_no_bounds_in_its_reduction(preset):
    """Zeros come from a pad stage (default layout) or from the input's padded layout (ALT's
    tiled template pads it), never from a test per multiply-add; the numbers stay right."""
    b = GraphBuilder("padded")
    b.op("conv", "conv2d", b.input("data", (1, 5, 9, 9), "NCHW"), b.const("conv.weight", (6, 5, 3, 3), "OIHW"),
         padding=1)
    g = b.build()
    acts = preset_actions(g, preset, "conv", tiles=3, ot=3, it=5) if preset else []
    prog = make_program(g, apply_actions(g, LayoutBook(), acts))
    func = prog.funcs["conv"]
    assert "if_then_else" not in _reduction_text(func)
    from workbench.engine.loops.primitives import apply_steps, list_blocks

    stages = set(list_blocks(apply_steps(func, [])))
    assert ("conv_input_pad" in stages) == (preset is None)
    assert prog.build(TARGET).verify().ok

