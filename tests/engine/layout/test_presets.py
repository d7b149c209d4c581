"""Layout presets (``layout.presets``): ``packed_gemv``, the decode step's weight panels: what it
stores, what it refuses, that the joint stage's layout space holds the same weight layout, and
that a decode layer with every weight packed computes what PyTorch computes."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engine.base.errors import LayoutError
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import DEFAULT_TARGET
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import PRESETS, preset_actions
from workbench.engine.models import zoo

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
