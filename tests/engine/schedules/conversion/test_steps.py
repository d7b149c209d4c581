"""Analytic schedules of layout-conversion kernels (``conversion.steps``): every conversion kernel
(split, reorder, fuse, unfold with halos, pad and their inverses, ALT's tiled conv layouts, odd
sizes) scheduled with ``conversion_steps`` writes what the reference says, its vector loop takes
the target's lanes, and the steps apply to every conversion kernel of every zoo model under every
preset. No timing is asserted."""

from __future__ import annotations

import pytest

from tests.engine.schedules.conversion.checks import (AVX2, AVX512, TARGET, kernel_loops, scheduled_loops,
                                                      scheduled_matches)
from tests.engine.schedules.graphs import LAYOUTS, ODD, alt_graph, conversion_kernels, cv_graph
from workbench.engine.base.errors import LayoutError, LoopError
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import vector_unit
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions, apply_layout
from workbench.engine.layout.presets import PRESETS, preset_actions
from workbench.engine.loops.primitives import apply_steps, list_loops
from workbench.engine.models import zoo
from workbench.engine.schedules.conversion import transpose
from workbench.engine.schedules.conversion.offsets import CopyAccess
from workbench.engine.schedules.conversion.steps import conversion_steps
from workbench.engine.schedules.conversion.transpose import transposed


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("key", ["data", "relu@conv", "relu2"])
def test_scheduled_conversions_and_their_inverses_match_the_reference(name, key):
    """``data``: the input converted into the layout; ``relu@conv``: a wish (the relu writes it
    itself, so relu gets a layout too and the conversion is between two layouts); ``relu2``:
    the graph output converted back (the inverse)."""
    g = cv_graph(ODD)
    book = LayoutBook()
    if key == "relu@conv":
        book = apply_actions(g, book, preset_actions(g, "channels_last", "data"))
        book = apply_actions(g, book, preset_actions(g, "channels_last", "relu"))
    for prim, args in LAYOUTS[name]:
        book = apply_layout(g, book, key, prim, args)
    scheduled_matches(g, book)


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_the_vector_loop_takes_the_targets_lanes(target, monkeypatch):
    """NCHW -> NCHW16c by the order model (the register tile off): the destination's innermost
    16 channels, split by the lanes; the source is contiguous along W: W is tiled right above
    the vector loop (a cache-tiled transpose)."""
    monkeypatch.setattr(transpose, "_TRANSPOSE_BYTES", 0)
    g = cv_graph((2, 32, 8, 48))
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "data", factor=16))
    prog = make_program(g, book)
    (k,) = conversion_kernels(prog)
    steps = conversion_steps(prog.funcs[k.name], k.name, target)
    lanes = vector_unit(target).lanes
    loops = list_loops(apply_steps(prog.funcs[k.name], steps), k.name)
    assert loops[-1].kind == "vectorized" and loops[-1].extent == lanes
    assert loops[-2].extent == 16 and loops[0].kind == "parallel"  # a cache line of W elements
    scheduled_matches(g, book, target)


def test_a_run_that_does_not_divide_the_lanes_is_still_vectorized():
    """A destination row of 7 x 9 x 11 elements has no multiple of the lanes: the innermost loop
    (11) is vectorized whole, not split with a predicate (which TVM would run as scalars)."""
    g = cv_graph(ODD)
    book = apply_layout(g, LayoutBook(), "data", "reorder", {"perm": [0, 1, 3, 2]})
    prog = make_program(g, book)
    (k,) = conversion_kernels(prog)
    steps = conversion_steps(prog.funcs[k.name], k.name, TARGET)
    assert not any(s.primitive == "split" and s.get("loop") == "i3" for s in steps)
    loops = list_loops(apply_steps(prog.funcs[k.name], steps), k.name)
    assert loops[-1].kind == "vectorized" and loops[-1].extent == 9  # W.i: 9 after the transpose


def test_a_block_that_is_not_a_conversion_is_refused():
    g = zoo.load("r18_stem")
    prog = make_program(g)
    with pytest.raises(LoopError, match="not a layout conversion|blocks"):
        conversion_steps(prog.funcs["conv"], "conv", TARGET)


def _zoo_cases():
    for model in zoo.MODELS:
        g = zoo.load(model)
        for preset in PRESETS.values():
            for target in preset.targets(g):
                yield model, preset.name, target


@pytest.mark.slow
def test_the_steps_apply_to_every_conversion_kernel_of_every_zoo_model_under_every_preset():
    seen = set()
    count = 0
    for model, preset, target in _zoo_cases():
        g = zoo.load(model)
        try:
            book = apply_actions(g, LayoutBook(), preset_actions(g, preset, target))
        except LayoutError:
            continue  # the preset does not fit this tensor (e.g. a rank-1 bias)
        prog = make_program(g, book)
        for k in conversion_kernels(prog):
            key = (model, tuple(prog.plan.buffers[k.inputs[0]].layout.prims),
                   tuple(prog.plan.buffers[k.outputs[0]].layout.prims))
            if key in seen:
                continue
            seen.add(key)
            steps = conversion_steps(prog.funcs[k.name], k.name, TARGET)
            sch = apply_steps(prog.funcs[k.name], steps)
            assert kernel_loops(sch, k.name)[-1].kind == "vectorized", (model, preset, target, k.name)
            count += 1
    assert count > 20


ALT_CASES = {  # graph args, preset params
    "3x3, tiles 4 (odd sizes)": (((1, 7, 9, 11),), {}),
    "3x3, tiles 4x16, whole tiles": (((1, 32, 8, 32), 32), {"tiles": [4, 16]}),
    "3x3, tiles 4x16, partial tiles": (((2, 20, 9, 37), 24), {"tiles": [4, 16]}),
    "1x1 stride 2": (((1, 16, 14, 18), 16, 1, 2, 0), {}),
    "7x7 stride 2, 3 channels (a stem)": (((2, 3, 30, 26), 16, 7, 2, 3), {}),
}


@pytest.mark.parametrize("name", list(ALT_CASES))
def test_alt_tiled_conversions_match_the_reference(name):
    args, params = ALT_CASES[name]
    g = alt_graph(*args)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", **params))
    convs = scheduled_matches(g, book, AVX2)
    assert {"convert_data_conv", "convert_conv_out"} <= {k.name for k in convs}  # the unfold, the way back


def test_a_unit_innermost_dim_does_not_take_the_vector():
    """ALT's stem input with it = 1 ends in C.i of 1 after the 9-wide W.w halo tile: the vector
    is the W.w run (the unit loop fused into it), not the unit loop, which left the copy scalar."""
    g = alt_graph((1, 3, 40, 40), 16, 7, 2, 3)
    prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 2], ot=16,
                                                                         it=1)))
    unfold = next(k for k in conversion_kernels(prog) if k.name == "convert_data_conv")
    assert [lp.extent for lp in list_loops(prog.funcs[unfold.name], unfold.name)][-2:] == [9, 1]
    steps, loops = scheduled_loops(prog, unfold.name, TARGET)
    assert loops[-1].kind == "vectorized" and loops[-1].extent == 9
    scheduled_matches(g, apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 2], ot=16,
                                                                        it=1)), TARGET)


def test_a_transpose_whose_tile_would_read_a_varying_region_keeps_the_order_model():
    """ALT's output tiled 1 H x 7 W x 64 channels -> NCHW looks like a plain transpose (W steps
    evenly through the source, 64 floats at a time, across its tiles too; the channels read its
    rows whole) but TVM cannot bound a 4x4 tile's source region across W's tiles of 7 (its loops'
    extents are not constants): the order model schedules it, and it matches the reference (the
    joint tuner's candidates met this kernel)."""
    g = alt_graph((1, 64, 4, 28), 64)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[1, 7], ot=64, it=64))
    prog = make_program(g, book)
    back = next(k.name for k in conversion_kernels(prog) if k.name == "convert_conv_out")
    func = prog.funcs[back]
    loops = list_loops(func, back)
    assert transposed(CopyAccess.of(func, back, loops), [lp.extent for lp in loops]) is not None
    assert "cache_read" not in [s.primitive for s in conversion_steps(func, back, AVX2)]
    scheduled_matches(g, book)
