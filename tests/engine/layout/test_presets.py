"""Layout presets (``layout.presets``): the stored shapes and contents of channels_last, blocked,
ALT's tiled layouts and NKn; ``packed_gemv``, the decode step's weight panels: what it stores, what
it refuses, that the joint stage's layout space holds the same weight layout, and that a decode
layer with every weight packed computes what PyTorch computes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.engine.base.errors import LayoutError
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import DEFAULT_TARGET
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions, current
from workbench.engine.layout.presets import PRESETS, preset_actions
from workbench.engine.models import zoo

TARGET = {"kind": "llvm", "num-cores": 2}

SMALL_DECODE = dict(hidden=64, heads=4, kv_heads=2, mlp=96, past=5)


@pytest.fixture(scope="module")
def decode():
    return zoo.load("llama_layer_decode", **SMALL_DECODE)


def _packed(graph, v: int, ops=None) -> LayoutBook:
    ops = ops or PRESETS["packed_gemv"].targets(graph)
    return apply_actions(graph, LayoutBook(), [a for op in ops for a in preset_actions(graph, "packed_gemv", op, v=v)])


def test_packed_gemv_stores_each_weight_in_panels_of_v_output_columns_and_nothing_else(decode):
    assert PRESETS["packed_gemv"].targets(decode) == [f"dense{i}" for i in range(1, 8)]
    book = _packed(decode, 16, ["dense5"])
    prog = make_program(decode, book)
    w = book.get("dense5.weight")
    assert decode.tensors["dense5.weight"].shape == (1, 64, 96) and w.shape == (1, 6, 64, 16)  # (1, N/v, K, v)
    # the weight's element (k, n) sits at panel n // 16, row k, lane n % 16
    assert list(book.get("dense5.weight").forward([0, 37, 50])) == [0, 3, 37, 2]
    # the activations keep their layout: no conversion kernel runs at run time
    assert [k.name for k in prog.plan.kernels if k.conversion is not None] == []
    assert prog.graph.tensors["dense5"].shape == decode.tensors["dense5"].shape


def test_packed_gemv_refuses_what_is_not_a_matmul_or_not_a_width(decode):
    with pytest.raises(LayoutError, match="packed_gemv applies to matmul; rms1 is"):
        preset_actions(decode, "packed_gemv", "rms1")
    for bad in (0, -16, 2.5, True):
        with pytest.raises(LayoutError, match="packed_gemv's v must be a positive number of columns"):
            preset_actions(decode, "packed_gemv", "dense1", v=bad)
    with pytest.raises(LayoutError, match="preset packed_gemv: .*unexpected keyword argument 'n'"):
        preset_actions(decode, "packed_gemv", "dense1", n=16)
    # wider than the output: one panel of all N columns
    steps = preset_actions(decode, "packed_gemv", "dense2", v=1024)
    assert [str(s) for s in steps] == ["split(dim=2, factors=[-1, 32])", "reorder(perm=[0, 2, 1, 3])"]


def test_the_joint_layout_space_holds_the_packed_weight_layout(decode):
    """With one row, GMM's NKn template (m = 1) stores B exactly as packed_gemv does: the joint
    stage's candidates include the decode layout for every lane-filling panel width."""
    from workbench.engine.tuning.joint import layout_space

    space = layout_space(decode, "dense5", lanes=16)
    ms = {c.kwargs["m"] for c in space if c.preset == "nkn"}
    widths = sorted(c.kwargs["n"] for c in space if c.preset == "nkn")
    assert ms == {1} and widths == [16, 32, 48]
    for n in widths:
        nkn_b = [str(s) for s in preset_actions(decode, "nkn", "dense5", m=1, n=n) if s.target == "dense5.weight"]
        assert nkn_b == [str(s) for s in preset_actions(decode, "packed_gemv", "dense5", v=n)]


@pytest.mark.slow  # a decode layer built on expert schedules, twice, and PyTorch's run of it (5-20 s)
@pytest.mark.parametrize("v", [16, 64])  # 64 does not divide the MLP's 96 columns: the last panel is padded
def test_a_decode_layer_with_packed_weights_computes_what_pytorch_computes(decode, v):
    from workbench.engine.models.frontend.framework import framework_outputs
    from workbench.engine.schedules.policy import scheduled_funcs

    prog = make_program(decode, _packed(decode, v))
    funcs = scheduled_funcs(prog, DEFAULT_TARGET, expert=[k.name for k in prog.plan.kernels])
    assert {f"dense{i}" for i in range(1, 8)} <= set(funcs)  # each packed GEMV on its expert schedule
    built = prog.with_funcs({**prog.funcs, **funcs}).build(DEFAULT_TARGET)
    values = decode.random_inputs(3)
    got = built.run(values)
    want = framework_outputs({"zoo": "llama_layer_decode", **SMALL_DECODE}, [values[t] for t in decode.inputs])
    for t, w in zip(decode.outputs, want, strict=True):
        assert got[t].shape == w.shape and np.abs(w).max() > 1e-2
        assert np.abs(got[t] - w).max() / np.abs(w).max() < 1e-4


########## Presets: stored shapes and contents ##########

def test_channels_last_and_blocked_on_the_conv_output():
    g = zoo.load("r18_stem")
    nhwo = apply_actions(g, LayoutBook(), preset_actions(g, "channels_last", "conv"))
    assert current(g, nhwo, "conv").shape == (1, 112, 112, 64) and current(g, nhwo, "conv").label == "N H W C"
    blk = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "conv", factor=16))
    lay = current(g, blk, "conv")
    assert lay.shape == (1, 4, 112, 112, 16)  # N (O/ot) H W ot
    data = np.random.default_rng(0).standard_normal((1, 64, 112, 112)).astype(np.float32)
    np.testing.assert_array_equal(lay.to_stored(data), data.reshape(1, 4, 16, 112, 112).transpose(0, 1, 3, 4, 2))
    np.testing.assert_array_equal(current(g, nhwo, "conv").to_stored(data), data.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("ht, wt, ot, it", [(4, 16, 16, 3), (4, 4, 16, 16), (8, 7, 32, 2)])
def test_alt_tiled_shapes_on_the_stem(ht, wt, ot, it):
    """Output N(H/ht)(W/wt)(O/ot) ht wt ot; input (the padded 230x230 image) unfolded into tiles
    of (ht-1)*2+7 rows every 2*ht rows (stride 2, 7x7 kernel); weight (O/ot)(I/it) KH KW it ot."""
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[ht, wt], ot=ot, it=it))
    assert current(g, book, "conv").shape == (1, math.ceil(112 / ht), math.ceil(112 / wt), 64 // ot, ht, wt, ot)
    th, tw, ic = (ht - 1) * 2 + 7, (wt - 1) * 2 + 7, min(it, 3)
    nh, nw = math.ceil((230 - th) / (2 * ht)) + 1, math.ceil((230 - tw) / (2 * wt)) + 1
    inp = current(g, book, "pad@conv")
    assert inp.shape == (1, nh, nw, math.ceil(3 / ic), th, tw, ic)
    assert current(g, book, "conv.weight").shape == (64 // ot, math.ceil(3 / ic), 7, 7, ic, ot)
    # the unfolded input holds, for each tile, the rows and columns that tile's outputs read
    x = np.random.default_rng(1).uniform(1, 2, (1, 3, 230, 230)).astype(np.float32)
    s = inp.to_stored(x)
    for a, bb in [(0, 0), (1, 2), (nh - 2, nw - 2)]:
        for c in range(3):
            want = x[0, c, a * 2 * ht:a * 2 * ht + th, bb * 2 * wt:bb * 2 * wt + tw]
            np.testing.assert_array_equal(s[0, a, bb, c // ic, :want.shape[0], :want.shape[1], c % ic], want)


def test_alt_tiled_with_stride_one_has_the_papers_input_tile():
    """Stride 1, padding 1, 3x3: input N(H/ht)(W/wt)(I/it)(ht+KH-1)(wt+KW-1)it (paper section 5)."""
    g = zoo.load("r18_block")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv1", tiles=[4, 8], ot=16, it=8))
    assert current(g, book, "conv1").shape == (1, 14, 7, 4, 4, 8, 16)
    assert current(g, book, "data@conv1").shape == (1, 14, 7, 8, 4 + 2, 8 + 2, 8)
    assert current(g, book, "conv1.weight").shape == (4, 8, 3, 3, 8, 16)


@pytest.mark.parametrize("k, stride, tiles", [(1, 2, 4), (3, 1, 100), (1, 3, 2)])
def test_alt_tiled_fits_strides_wider_than_the_kernel_and_tiles_wider_than_the_output(k, stride, tiles):
    """A 1x1 stride-2 conv (ResNet's downsample) and tiles larger than the output are accepted."""
    b = GraphBuilder("ds")
    x = b.input("data", (1, 8, 9, 9))
    b.op("conv", "conv2d", x, b.const("conv.weight", (16, 8, k, k)), stride=stride, padding=k // 2)
    g = b.build()
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=tiles, ot=8, it=4))
    out = g.tensor("conv").shape[2]
    t = min(tiles, out)
    assert current(g, book, "conv").shape == (1, math.ceil(out / t), math.ceil(out / t), 2, t, t, 8)
    assert make_program(g, book).build(TARGET).verify(g.random_inputs(seed=3)).ok


def test_alt_tiled_can_leave_the_output_in_its_layout():
    """``tile_out=False``: input and weight as ALT's template makes them, the output as it was, so
    the program has no conversion after the conv and still computes the conv."""
    g = zoo.load("r18_stem")
    tiled = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16], ot=32, it=3))
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16], ot=32, it=3,
                                                         tile_out=False))
    assert current(g, book, "conv").shape == g.tensor("conv").shape
    for key in ("pad@conv", "conv.weight"):
        assert current(g, book, key).shape == current(g, tiled, key).shape
    assert len(make_program(g, book).plan.kernels) == len(make_program(g, tiled).plan.kernels) - 1
    assert make_program(g, book).build(TARGET).verify(g.random_inputs(seed=4)).ok
    with pytest.raises(LayoutError, match="tile_out must be true or false, got 'no'"):
        preset_actions(g, "alt_tiled", "conv", tile_out="no")


def test_nkn_tiles_a_gmm_and_a_batched_gmm():
    g = zoo.load("gmm", m=64, n=48, k=32)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "nkn", "gmm", m=16, n=16))
    assert current(g, book, "gmm").shape == (4, 3, 16, 16)  # (M/m)(N/n) m n
    assert current(g, book, "a@gmm").shape == (4, 32, 16)  # (M/m) K m
    assert current(g, book, "gmm.weight").shape == (3, 32, 16)  # (N/n) K n
    a = np.random.default_rng(2).standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_array_equal(current(g, book, "a@gmm").to_stored(a), a.reshape(4, 16, 32).transpose(0, 2, 1))
    bert = zoo.load("bert_tiny_layer")
    book = apply_actions(bert, LayoutBook(), preset_actions(bert, "nkn", "scores", m=16, n=32))
    assert current(bert, book, "scores").shape == (2, 8, 4, 16, 32)
    assert current(bert, book, "q_heads@scores").shape == (2, 8, 64, 16)
    assert current(bert, book, "k_t@scores").shape == (2, 4, 64, 32)
