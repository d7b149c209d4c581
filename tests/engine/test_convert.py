"""Analytic schedules of layout-conversion kernels (``expert.convert``): every conversion kernel
(split, reorder, fuse, unfold with halos, pad and their inverses, odd sizes) scheduled with
``conversion_steps`` writes what the reference says, and the steps apply to every conversion
kernel of every zoo model under every preset. No timing is asserted here."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engine import zoo
from workbench.engine.errors import LayoutError, LoopError
from workbench.engine.expert.convert import conversion_steps
from workbench.engine.graph import GraphBuilder
from workbench.engine.book import LayoutBook
from workbench.engine.keys import apply_actions, apply_layout
from workbench.engine.loops import apply_steps, list_loops
from workbench.engine.presets import PRESETS, preset_actions
from workbench.engine.program import make_program
from workbench.engine.targets import vector_unit

TARGET = {"kind": "llvm", "num-cores": 2}
AVX2 = {"kind": "llvm", "mcpu": "haswell", "num-cores": 4}
AVX512 = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}


def _graph(shape):
    """data -> relu -> conv -> relu2: the input, the relu (its wish) and the output convert."""
    b = GraphBuilder("cv")
    x = b.input("data", shape)
    r = b.op("relu", "relu", x)
    y = b.op("conv", "conv2d", r, b.const("conv.weight", (5, shape[1], 3, 3)), padding=1)
    b.op("relu2", "relu", y)
    return b.build()


ODD = (1, 7, 9, 11)  # no dim divides the lanes
LAYOUTS = {
    "split+reorder (blocked, padding)": [("split", {"dim": 1, "factors": [-1, 4]}), ("reorder", {"perm": [0, 1, 3, 4, 2]})],
    "reorder (channels last)": [("reorder", {"perm": [0, 2, 3, 1]})],
    "reorder (spatial transpose)": [("reorder", {"perm": [0, 1, 3, 2]})],
    "fuse then reorder": [("fuse", {"dims": [2, 3]}), ("reorder", {"perm": [0, 2, 1]})],
    "split W, inner last": [("split", {"dim": 3, "factors": [-1, 4]}), ("reorder", {"perm": [0, 1, 2, 3, 4]}),
                            ("reorder", {"perm": [0, 3, 1, 2, 4]})],
    "pad H and W": [("pad", {"dim": 2, "before": 1, "after": 2}), ("pad", {"dim": 3, "before": 1, "after": 1})],
    "pad then channels last": [("pad", {"dim": 3, "before": 1, "after": 1}), ("reorder", {"perm": [0, 2, 3, 1]})],
    "unfold with halos": [("unfold", {"dim": 2, "tile": 4, "stride": 3}), ("unfold", {"dim": 4, "tile": 5, "stride": 3})],
    "unfold + pad + blocked (ALT's input)": [("pad", {"dim": 3, "before": 1, "after": 1}),
                                            ("unfold", {"dim": 3, "tile": 6, "stride": 4}),
                                            ("split", {"dim": 1, "factors": [-1, 4]}),
                                            ("reorder", {"perm": [0, 1, 3, 4, 5, 2]})],
}


def _conversion_kernels(prog):
    return [k for k in prog.plan.kernels if k.conversion]


def _scheduled_matches(graph, book, target=TARGET, seed=0):
    """Schedule every conversion kernel with ``conversion_steps``; every buffer any kernel writes
    matches the reference in its stored layout (padding zero, halos duplicated)."""
    prog = make_program(graph, book)
    convs = _conversion_kernels(prog)
    assert convs, "the case makes no conversion kernel"
    funcs = {}
    for k in convs:
        steps = conversion_steps(prog.funcs[k.name], k.name, target)
        assert [s.primitive for s in steps][-1] == "vectorize" and all(s.kind == "loop" for s in steps)
        funcs[k.name] = apply_steps(prog.funcs[k.name], steps).mod["main"]
    built = prog.with_funcs(funcs).build(TARGET)
    values = graph.random_inputs(seed)
    ref = graph.reference(values)
    bufs = built.run_buffers(values)
    for k in prog.plan.kernels:
        for name in k.outputs:
            buf = prog.plan.buffers[name]
            np.testing.assert_allclose(bufs[name], buf.layout.to_stored(ref[buf.tensor]), rtol=1e-4, atol=1e-4,
                                       err_msg=name)
    assert built.verify(values).ok
    return convs


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("key", ["data", "relu@conv", "relu2"])
def test_scheduled_conversions_and_their_inverses_match_the_reference(name, key):
    """``data``: the input converted into the layout; ``relu@conv``: a wish (the relu writes it
    itself, so relu gets a layout too and the conversion is between two layouts); ``relu2``:
    the graph output converted back (the inverse)."""
    g = _graph(ODD)
    book = LayoutBook()
    if key == "relu@conv":
        book = apply_actions(g, book, preset_actions(g, "channels_last", "data"))
        book = apply_actions(g, book, preset_actions(g, "channels_last", "relu"))
    for prim, args in LAYOUTS[name]:
        book = apply_layout(g, book, key, prim, args)
    _scheduled_matches(g, book)


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_the_vector_loop_takes_the_targets_lanes(target):
    """NCHW -> NCHW16c: the destination's innermost 16 channels, split by the lanes; the source
    is contiguous along W: W is tiled right above the vector loop (a cache-tiled transpose)."""
    g = _graph((2, 32, 8, 48))
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "data", factor=16))
    prog = make_program(g, book)
    (k,) = _conversion_kernels(prog)
    steps = conversion_steps(prog.funcs[k.name], k.name, target)
    lanes = vector_unit(target).lanes
    loops = list_loops(apply_steps(prog.funcs[k.name], steps), k.name)
    assert loops[-1].kind == "vectorized" and loops[-1].extent == lanes
    assert loops[-2].extent == 16 and loops[0].kind == "parallel"  # a cache line of W elements
    _scheduled_matches(g, book, target)


def test_a_run_that_does_not_divide_the_lanes_is_still_vectorized():
    """A destination row of 7 x 9 x 11 elements has no multiple of the lanes: the innermost loop
    (11) is vectorized whole, not split with a predicate (which TVM would run as scalars)."""
    g = _graph(ODD)
    book = apply_layout(g, LayoutBook(), "data", "reorder", {"perm": [0, 1, 3, 2]})
    prog = make_program(g, book)
    (k,) = _conversion_kernels(prog)
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
        for k in _conversion_kernels(prog):
            key = (model, tuple(prog.plan.buffers[k.inputs[0]].layout.prims),
                   tuple(prog.plan.buffers[k.outputs[0]].layout.prims))
            if key in seen:
                continue
            seen.add(key)
            steps = conversion_steps(prog.funcs[k.name], k.name, TARGET)
            sch = apply_steps(prog.funcs[k.name], steps)
            assert list_loops(sch, k.name)[-1].kind == "vectorized", (model, preset, target, k.name)
            count += 1
    assert count > 20
