"""Analytic schedules of layout-conversion kernels (``expert.convert``): every conversion kernel
(split, reorder, fuse, unfold with halos, pad and their inverses, ALT's tiled conv layouts, odd
sizes) scheduled with ``conversion_steps`` writes what the reference says, and the steps apply to
every conversion kernel of every zoo model under every preset; the loop orders the model picks
for ALT's layouts (on fixed caches), register tiles, tile buffers, interleaved rows and border
cuts. No timing is asserted."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import tvm
from tvm import s_tir, tirx

from tests.engine.schedules.graphs import LAYOUTS, ODD, alt_graph, conversion_kernels, cv_graph
from workbench.engine.build import codegen
from workbench.engine.models import zoo
from workbench.engine.base.errors import LayoutError, LoopError
from workbench.engine.schedules.conversion import order as order_model
from workbench.engine.schedules.conversion import traffic, transpose, vendor
from workbench.engine.schedules.conversion.steps import conversion_steps
from workbench.engine.schedules.conversion.interleaving import interleaves
from workbench.engine.schedules.conversion.offsets import CopyAccess
from workbench.engine.schedules.conversion.traffic import Cache
from workbench.engine.schedules.conversion.transpose import transposed
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions, apply_layout
from workbench.engine.loops.primitives import LoopInfo, apply_steps, list_loops, walk_nest
from workbench.engine.layout.presets import PRESETS, preset_actions
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import target_from, vector_unit

TARGET = {"kind": "llvm", "num-cores": 2}
AVX2 = {"kind": "llvm", "mcpu": "haswell", "num-cores": 4}
AVX512 = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}
ZEN = {"kind": "llvm", "mcpu": "znver3", "num-cores": 2}
#: 8 lanes and the order model's gathered rows (an AMD CPU: no register tiles for them; its
#: ``_SCATTER_AVERSE`` rule applies too)
GATHER = dict(ZEN, **{"num-cores": 4})


def _scheduled_matches(graph, book, target=TARGET, seed=0):
    """Schedule every conversion kernel with ``conversion_steps``; every buffer any kernel writes
    matches the reference in its stored layout (padding zero, halos duplicated)."""
    prog = make_program(graph, book)
    convs = conversion_kernels(prog)
    assert convs, "the case makes no conversion kernel"
    funcs = {}
    for k in convs:
        steps = conversion_steps(prog.funcs[k.name], k.name, target)
        prims = [s.primitive for s in steps]
        last = len(prims) - 1 - prims[::-1].index("vectorize")  # then only the borders cut off
        assert set(prims[last + 1:]) <= {"loop_partition"} and all(s.kind == "loop" for s in steps)
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
    g = cv_graph(ODD)
    book = LayoutBook()
    if key == "relu@conv":
        book = apply_actions(g, book, preset_actions(g, "channels_last", "data"))
        book = apply_actions(g, book, preset_actions(g, "channels_last", "relu"))
    for prim, args in LAYOUTS[name]:
        book = apply_layout(g, book, key, prim, args)
    _scheduled_matches(g, book)


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
    _scheduled_matches(g, book, target)


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
            assert _kernel_loops(sch, k.name)[-1].kind == "vectorized", (model, preset, target, k.name)
            count += 1
    assert count > 20


########## ALT's tiled layouts ##########

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
    convs = _scheduled_matches(g, book, AVX2)
    assert {"convert_data_conv", "convert_conv_out"} <= {k.name for k in convs}  # the unfold, the way back


@pytest.fixture
def caches(monkeypatch):
    """The order model on fixed caches (32 KiB L1, 512 KiB L2, 64 B lines): the orders below
    do not depend on the machine the tests run on."""
    monkeypatch.setattr(traffic, "cache_info", lambda: ({"L1d": 32 << 10, "L2": 512 << 10, "L3": 32 << 20}, 64, ""))
    monkeypatch.setattr(traffic.mmap, "PAGESIZE", 4096)


def _alt_kernels(shape, tiles):
    g = alt_graph(shape, 16)
    prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=tiles)))
    unfold, back = conversion_kernels(prog)
    return prog, unfold.name, back.name


def _kernel_loops(sch, kernel):
    """The loops around the kernel's block, from the root; where ``borders`` cut the block into
    copies, around its largest copy (the interior), the loops of the blocks above it first."""
    nests = []
    walk_nest(sch.mod["main"], lambda r, ctx: nests.append((r.block.name_hint, ctx)) or ctx,
              lambda loop, ctx: ctx + [loop], [])
    leaves = [(name, loops) for name, loops in nests
              if name.startswith(kernel) and not name.endswith(("_common", "_partition"))]
    name, loops = max(leaves, key=lambda nl: math.prod(int(f.extent) for f in nl[1]))
    own = list_loops(sch, name)
    outer = loops[:len(loops) - len(own)]
    return [LoopInfo(name, str(f.loop_var.name), int(f.extent), tirx.ForKind(int(f.kind)).name.lower(), d)
            for d, f in enumerate(outer)] + [replace(lp, depth=len(outer) + lp.depth) for lp in own]


def _scheduled_loops(prog, kernel, target=AVX2):
    steps = conversion_steps(prog.funcs[kernel], kernel, target)
    return steps, _kernel_loops(apply_steps(prog.funcs[kernel], steps), kernel)


def test_the_tiled_output_is_read_a_source_tile_at_a_time(caches):
    """N(H/4)(W/16)(C/16)4x16x16 -> NCHW: W is split where the source's 16-wide tiles start, and
    the innermost loops are a 16x16 transpose that writes each channel's line whole (16 W: two
    AVX2 vectors) while it reads the tile's 16 source lines (built for the AMD EPYC, which keeps
    the gather)."""
    prog, _, back = _alt_kernels((1, 16, 16, 64), [4, 16])
    steps, loops = _scheduled_loops(prog, back, GATHER)
    assert any(s.primitive == "split" and s.get("loop") == "i3" and s.get("factors")[1:] == [2, 8] for s in steps)
    assert [lp.extent for lp in loops[-3:]] == [16, 2, 8] and loops[-1].kind == "vectorized"
    assert loops[-3].name.startswith("i1")  # the channels, outside the 16 W of a line
    assert loops[0].kind == "parallel"


def test_the_unfold_reads_whole_rows_of_half_the_channels(caches):
    """NCHW -> N(H/4)(W/16)(C/16)6x18x16 (halos): each output tile row reads 18 input elements
    of 16 channel rows. The 8 channels of a vector are gathered along whole input rows (the
    column tiles, halos and all, inside the row loop), the other 8 channels after them: 8 read
    streams at a time, each a whole row long. The half of the channels is no parallel loop:
    the threads write lines of their own (``_whole_lines_apart``)."""
    prog, unfold, _ = _alt_kernels((1, 64, 16, 112), [4, 16])
    steps, loops = _scheduled_loops(prog, unfold)
    # loops: i1 H.t, i2 W.t, i3 C.o, i4 H.w, i5 W.w, i6 C.i (split by the lanes)
    order = next(s for s in steps if s.primitive == "reorder").get("loops")
    assert order[-3:] == ["i2", "i5", "i6_1"] and loops[-1].extent == 8
    assert order.index("i6_0") < order.index("i2") and order.index("i4") < order.index("i2")
    fused = next(s for s in steps if s.primitive == "fuse").get("loops")
    assert "i6_0" not in fused and loops[0].kind == "parallel" and loops[0].name == "_".join(fused) + "_fused"


def test_the_parallel_loops_give_each_thread_whole_rows(caches):
    """ALT's output with 4 x 4 tiles -> NCHW (rows of 56 W, 4-float pieces from each source tile):
    the order model puts a W piece among the outer loops, which ``parallel_outer`` would fuse
    (each chunk would then write a 4-float column of every row); the W pieces move inside the parallel loops, which take the H tiles' rows instead.
    The kernel matches the reference."""
    g = alt_graph((1, 64, 56, 56), 16)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 4]))
    prog = make_program(g, book)
    steps, loops = _scheduled_loops(prog, "convert_conv_out", GATHER)
    # loops: i1 C, i2 H (by the 4-high tiles), i3 W (by the 4-wide tiles)
    fused = next(s for s in steps if s.primitive == "fuse").get("loops")
    assert not any(n.startswith("i3") for n in fused) and loops[0].kind == "parallel"
    assert loops[0].extent >= 8 * GATHER["num-cores"]
    order = next(s for s in steps if s.primitive == "reorder").get("loops")
    assert order.index("i2_1") < order.index("i3_0") < order.index("i3_1")
    _scheduled_matches(g, book, GATHER)


def _stem_unfold(batch=1):
    """The stem's input unfold (tiles [14, 2], it = 1): 9-float tile rows."""
    g = alt_graph((batch, 3, 128, 128), 16, 7, 2, 3)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[14, 2], ot=16, it=1))
    prog = make_program(g, book)
    return g, book, prog, next(k for k in conversion_kernels(prog) if k.name == "convert_data_conv")


def test_an_unfold_with_rows_shorter_than_a_line_writes_in_the_destinations_order_on_amd(caches, monkeypatch):
    """ALT's stem unfold with 9-float tile rows (tiles [14, 2], it = 1): the model's tile, the W
    tiles inside each row, would write 9 floats to a page after another; built for the AMD EPYC
    (``znver3``) the destination's order replaces it (it reads as few lines: the window slides 4
    of its 9 floats under the L1, and writes one stream); without that rule (``_TIE`` below zero)
    the model's order comes back. Built for Intel's CPUs the model's order stays."""
    _, _, prog, unfold = _stem_unfold()
    steps, loops = _scheduled_loops(prog, unfold.name, ZEN)
    assert not any(s.primitive == "reorder" for s in steps)
    assert loops[-1].extent == 9 and loops[-1].kind == "vectorized"
    for intel in (AVX2, AVX512):
        steps, loops = _scheduled_loops(prog, unfold.name, intel)
        assert next(s for s in steps if s.primitive == "reorder").get("loops")[-2:] == ["i2", "i5_i6_fused"]
    monkeypatch.setattr(vendor, "_TIE", -1.0)
    steps, _ = _scheduled_loops(prog, unfold.name, ZEN)
    assert any(s.primitive == "reorder" for s in steps)


def _guarded_stores(sch):
    """How many stores keep a pad condition once the blocks are lowered and TVM simplified them."""
    lower = tvm.transform.Sequential([s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.LowerOpaqueBlock(),
                                      s_tir.transform.StmtSimplify()])
    return lower(sch.mod)["main"].script().count("if_then_else")


@pytest.mark.slow
@pytest.mark.parametrize("target", [ZEN, AVX512])
def test_a_padded_unfold_copies_its_interior_without_the_pad_condition(target):
    """The stem unfold's reads are guarded by the pad condition, which a 9-lane vector carries
    lane by lane (a branch and a scalar copy each): its W and H tile loops are cut into border
    and interior ranges (``loop_partition``, W first), so that the interior copy has no
    condition left once TVM simplifies it; the borders keep theirs, and the kernel still matches
    the reference. (At batch 16 the batch alone is the parallel loop: a loop fused into it is
    not cut.)"""
    g, book, prog, unfold = _stem_unfold(16)
    func = prog.funcs[unfold.name]
    steps = conversion_steps(func, unfold.name, target)
    cuts = [s for s in steps if s.primitive == "loop_partition"]
    w_tiles, h_tiles = (lp.extent for lp in list_loops(func, unfold.name)[2:0:-1])
    assert [(s.get("loop"), sum(s.get("factors"))) for s in cuts] == [("i2", w_tiles), ("i1", h_tiles)]
    assert all(len(s.get("factors")) == 3 and s.get("factors")[1] >= s.get("factors")[0] for s in cuts)
    assert steps[-2:] == cuts
    assert _guarded_stores(apply_steps(func, steps)) == 3 * 3 - 1  # the interior copy has none
    assert _guarded_stores(apply_steps(func, steps[:-2])) == 1
    _scheduled_matches(g, book, target)


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_rows_that_interleave_channel_planes_are_vectorized_along_the_rows(target):
    """The stem unfold with tiles [4, 16]: its rows are 37 W x 3 channels, each channel read
    from a plane of its own. The W loop is the vector (whole vectors, then one of the rest) and
    the channels are unrolled inside it, which ``codegen`` writes as one interleaving shuffle
    and dense stores. The W tiles are cut a border tile at a time, and in each border tile the
    row where the image's border crosses it (the left tile's first 3 floats are padding), so
    that no vector's lanes test the border; the kernel matches the reference."""
    g = alt_graph((1, 3, 224, 224), 16, 7, 2, 3)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16]))
    prog = make_program(g, book)
    func = prog.funcs["convert_data_conv"]
    assert [lp.extent for lp in list_loops(func, "convert_data_conv")][-2:] == [37, 3]
    lanes = vector_unit(target).lanes
    steps = conversion_steps(func, "convert_data_conv", target)
    vectors = {s.get("block"): s.get("loop") for s in steps if s.primitive == "vectorize"}
    unrolled = {s.get("block") for s in steps if s.primitive == "unroll" and s.get("loop") == "i6"}
    assert set(vectors) == unrolled and all(loop.startswith("i5") for loop in vectors.values())
    cuts = {s.get("block"): s.get("factors") for s in steps if s.primitive == "loop_partition"}
    assert cuts["convert_data_conv"] == [1, 5, 1, 1]  # the W tiles: each border tile alone
    assert cuts["convert_data_conv_i20"][0] == 3 and sum(cuts["convert_data_conv_i20"]) == 37
    sch = apply_steps(func, steps)
    widths = [lp.extent for block in vectors for lp in list_loops(sch, block) if lp.kind == "vectorized"]
    assert max(widths) == lanes and 37 % lanes in widths
    text = codegen.lowered(sch.mod["main"], target).script()
    # one interleaving shuffle per unrolled block (on AVX-512 the rest's 5-lane loads are masked
    # loads of 8, each picked out by a shuffle of its own: ``codegen.MaskedLoads``)
    assert text.count("T.Shuffle") - text.count("T.Shuffle([T.masked_load") == len(unrolled)
    _scheduled_matches(g, book, target)


def test_rows_of_half_a_vector_or_more_are_one_narrower_vector():
    """Tiles [4, 4]: rows of 13 W x 3 channels, under AVX-512's 16 lanes: each interior row is
    one 13-lane vector, the channels unrolled; rows under half a vector keep the channels as the
    vector (``interleaves``)."""
    g = alt_graph((1, 3, 224, 224), 16, 7, 2, 3)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 4]))
    prog = make_program(g, book)
    func = prog.funcs["convert_data_conv"]
    steps = conversion_steps(func, "convert_data_conv", AVX512)
    sch = apply_steps(func, steps)
    blocks = {s.get("block") for s in steps if s.primitive == "vectorize"}
    widths = {lp.extent for block in blocks for lp in list_loops(sch, block) if lp.kind == "vectorized"}
    assert 13 in widths and max(widths) == 13
    assert codegen.lowered(sch.mod["main"], AVX512).script().count("T.Shuffle") >= 1
    _scheduled_matches(g, book, AVX512)
    names = [lp.name for lp in list_loops(func, "convert_data_conv")]
    loops = [replace(lp, extent=5) if lp.name == "i5" else lp for lp in list_loops(func, "convert_data_conv")]
    access = CopyAccess.of(func, "convert_data_conv", list_loops(func, "convert_data_conv"))
    assert interleaves(access, names, loops[-2:], 16, 16) is False  # 5 W under 16 lanes
    assert interleaves(access, names, list_loops(func, "convert_data_conv")[-2:], 16, 16) is True


@pytest.mark.parametrize("target", [AVX2, AVX512, TARGET])
def test_rows_interleaved_by_the_parallel_loop_itself_are_not_cut(target):
    """[3, 100] -> [100, 3]: the rows' loop is the only outer loop, so it runs in parallel; it
    is not cut into pieces (a parallel loop cannot be partitioned) and the kernel matches."""
    b = GraphBuilder("rows")
    b.op("relu", "relu", b.input("data", (3, 100)))
    g = b.build()
    book = apply_layout(g, LayoutBook(), "data", "reorder", {"perm": [1, 0]})
    prog = make_program(g, book)
    for k in conversion_kernels(prog):
        steps = conversion_steps(prog.funcs[k.name], k.name, target)
        assert not any(s.primitive == "loop_partition" for s in steps)
    _scheduled_matches(g, book, target)


def test_a_transpose_gathers_no_more_channels_than_an_l1_set_holds(caches, monkeypatch):
    """NCHW -> NCHW16c by the order model (the register tile off) with channel planes a
    multiple of the page apart: the 16 channels' lines at one W share an L1 set (8 ways), so
    the tile gathers 8 channels along 16 W (the source's line) before the other 8, instead of
    all 16 channels at each W."""
    monkeypatch.setattr(transpose, "_TRANSPOSE_BYTES", 0)
    g = cv_graph((1, 32, 32, 128))  # a plane: 4096 elements (16 KiB)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "data", factor=16))
    prog = make_program(g, book)
    (k,) = conversion_kernels(prog)
    _, loops = _scheduled_loops(prog, k.name)
    assert [lp.extent for lp in loops[-2:]] == [16, 8]  # W.i under C.i's vector
    assert loops[-2].name.startswith("i3")


def test_a_unit_innermost_dim_does_not_take_the_vector():
    """ALT's stem input with it = 1 ends in C.i of 1 after the 9-wide W.w halo tile: the vector
    is the W.w run (the unit loop fused into it), not the unit loop, which left the copy scalar."""
    g = alt_graph((1, 3, 40, 40), 16, 7, 2, 3)
    prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 2], ot=16,
                                                                         it=1)))
    unfold = next(k for k in conversion_kernels(prog) if k.name == "convert_data_conv")
    assert [lp.extent for lp in list_loops(prog.funcs[unfold.name], unfold.name)][-2:] == [9, 1]
    steps, loops = _scheduled_loops(prog, unfold.name, TARGET)
    assert loops[-1].kind == "vectorized" and loops[-1].extent == 9
    _scheduled_matches(g, apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 2], ot=16,
                                                                        it=1)), TARGET)


def test_rows_gathered_across_source_tiles_go_through_a_buffer_written_back_whole():
    """ALT's tiled output -> NCHW (rows of 64 W from 16-wide tiles, larger than half the L2):
    the conversion writes a buffer, copied to the destination row by row after its tile, and
    matches the reference; NCHW16c -> NCHW (each row from one tile) and a small output do not.
    (Built for the AMD EPYC: on AVX-512 and Intel's AVX2 the gathered rows go through register
    tiles instead.)"""
    def conv(shape, *acts):
        b = GraphBuilder("tiles")
        b.op("conv", "conv2d", b.input("data", shape), b.const("conv.weight", (32, shape[1], 3, 3)), padding=1)
        g = b.build()
        return g, apply_actions(g, LayoutBook(), [s for name, on, params in acts
                                                  for s in preset_actions(g, name, on, **params)])

    def steps_of(g, book, kernel="convert_conv_out"):
        prog = make_program(g, book)
        return conversion_steps(prog.funcs[kernel], kernel, GATHER)

    cap = Cache.of(4).cap
    big = (max(1, 4 * cap // (32 * 64 * 64)), 8, 64, 64)  # the output: 4x half the L2
    g, book = conv(big, ("alt_tiled", "conv", {"tiles": [4, 16], "ot": 16, "it": 8}))
    steps = steps_of(g, book)
    assert [s.primitive for s in steps][-4:] == ["cache_write", "reverse_compute_at", "split", "vectorize"]
    back = dict(steps[-1].args)["block"]
    assert back == "convert_conv_out_global" and dict(steps[-2].args)["factors"][-1] == vector_unit(GATHER).lanes
    _scheduled_matches(g, book, target=GATHER)
    g, book = conv(big, ("blocked", "data@conv", {"factor": 16}), ("blocked", "conv", {"factor": 16}))
    assert "cache_write" not in [s.primitive for s in steps_of(g, book)]
    g, book = conv((1, 8, 16, 16), ("alt_tiled", "conv", {"tiles": [4, 16], "ot": 16, "it": 8}))
    assert "cache_write" not in [s.primitive for s in steps_of(g, book)]


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize("preset, key, factor", [("channels_last", "data", None), ("channels_last", "relu2", None),
                                                 ("blocked", "data", 16)])
def test_a_plain_transpose_moves_four_by_four_tiles_through_registers(target, preset, key, factor):
    """NCHW -> NHWC, NHWC -> NCHW (the output converted back) and NCHW -> NCHW16c: the source's
    rows (W, or C) and the destination's (C, or W) are split by 4 floats (16 bytes); each 4x4
    tile is read into a local buffer along the source's rows and written along the
    destination's, both vectorized, and the result matches the reference."""
    g = cv_graph((2, 32, 8, 48), out_channels=8)
    params = {"factor": factor} if factor else {}
    book = apply_actions(g, LayoutBook(), preset_actions(g, preset, key, **params))
    prog = make_program(g, book)
    (k,) = conversion_kernels(prog)
    steps = conversion_steps(prog.funcs[k.name], k.name, target)
    sch = apply_steps(prog.funcs[k.name], steps)
    assert [s.primitive for s in steps if s.primitive in ("cache_read", "compute_at")] == ["cache_read", "compute_at"]
    tile = dict(next(s for s in steps if s.primitive == "compute_at").args)["block"]
    for block in (tile, k.name):
        loops = list_loops(sch, block)
        assert [lp.kind for lp in loops[-2:]] == ["unrolled", "vectorized"] and loops[-1].extent == 4
    assert list_loops(sch, k.name)[0].kind == "parallel"
    _scheduled_matches(g, book)


@pytest.mark.parametrize("key, width, block", [("data", 48, 32), ("relu2", 48, 16), ("data", 16, 64)])
def test_a_transpose_sweeps_the_channels_a_block_at_a_time(key, width, block):
    """The channels (a plane apart in NCHW) go a block at a time around the W tiles, so a tile
    sweep keeps a block's streams going instead of all 64: NCHW -> NHWC reads 2 lines' worth of
    channel rows at once (32 floats), NHWC -> NCHW writes a line's worth (16); source rows
    shorter than the block (16 W) keep every channel in the sweep."""
    g = cv_graph((2, 64, 8, width), out_channels=64)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "channels_last", key))
    prog = make_program(g, book)
    (k,) = conversion_kernels(prog)
    sch = apply_steps(prog.funcs[k.name], conversion_steps(prog.funcs[k.name], k.name, AVX512))
    tile = [lp.extent for lp in list_loops(sch, k.name)[-5:]]  # (far block, W tiles, far tiles in it), 4 x 4
    if block < 64:
        assert tile == [64 // block, width // 4, block // 4, 4, 4], tile
    else:  # (the outer loops, fused), W tiles, all channel tiles, 4 x 4
        assert tile[1:] == [width // 4, 16, 4, 4], tile
    _scheduled_matches(g, book)


@pytest.mark.parametrize("target", [AVX512, AVX2], ids=["avx512", "avx2"])
def test_a_tiled_output_moves_register_tiles_inside_each_source_tile(target):
    """ALT's output (16-channel x 16-W source tiles) -> NCHW: built for AVX-512, or for AVX2 on
    an Intel CPU, the order model's two innermost loops (C.i reading the tile's rows, W.i
    gathering across them, 16 floats apart) go through 4x4 register tiles (a local tile read
    along C.i, written along W.i), in the order made for a line-wide vector on both; built for
    the AMD EPYC (8 lanes) the order model's vectorized gather stays. All match the reference."""
    g = alt_graph((1, 32, 8, 32), 32)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16]))
    prog = make_program(g, book)
    back = next(k.name for k in conversion_kernels(prog) if k.name == "convert_conv_out")
    steps = conversion_steps(prog.funcs[back], back, target)
    wide = conversion_steps(prog.funcs[back], back, dict(AVX512, **{"num-cores": target["num-cores"]}))
    assert steps == wide
    assert [s.primitive for s in steps if s.primitive in ("cache_read", "compute_at", "cache_write")] == \
        ["cache_read", "compute_at"]
    sch = apply_steps(prog.funcs[back], steps)
    tile = dict(next(s for s in steps if s.primitive == "compute_at").args)["block"]
    for block in (tile, back):
        assert [(lp.kind, lp.extent) for lp in list_loops(sch, block)[-2:]] == [("unrolled", 4), ("vectorized", 4)]
    assert "cache_read" not in [s.primitive for s in conversion_steps(prog.funcs[back], back, GATHER)]
    tvm.compile(tvm.IRModule({"main": sch.mod["main"]}), target=target_from(target))  # builds where AVX-512 is not
    _scheduled_matches(g, book, target)  # these steps, built for the host
    _scheduled_matches(g, book, GATHER)


def test_on_avx512_rows_crossing_tiles_of_odd_width_go_through_four_by_piece_tiles():
    """ALT's output tiled 4 H x 14 W x 16 channels -> NCHW: each 28-wide row crosses a source
    tile every 14 W, which 4 does not divide, so 4x4 tiles do not apply; built for AVX-512 the
    row is split at the tiles and 4 channels (the source's rows) move inside it: a local
    14 W x 4 channel tile read along the channels, written 4 rows of 14 W. Matches the
    reference; built for the AMD EPYC the order model's gather stays."""
    g = alt_graph((1, 32, 8, 28), 32)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 14]))
    prog = make_program(g, book)
    back = next(k.name for k in conversion_kernels(prog) if k.name == "convert_conv_out")
    steps = conversion_steps(prog.funcs[back], back, AVX512)
    splits = [(s.get("loop"), s.get("factors")) for s in steps if s.primitive == "split"]
    assert ("i3", [None, 14]) in splits and any(f == [None, 4] for _, f in splits)
    sch = apply_steps(prog.funcs[back], steps)
    tile = dict(next(s for s in steps if s.primitive == "compute_at").args)["block"]
    assert [(lp.kind, lp.extent) for lp in list_loops(sch, tile)[-2:]] == [("unrolled", 14), ("vectorized", 4)]
    assert [(lp.kind, lp.extent) for lp in list_loops(sch, back)[-2:]] == [("unrolled", 4), ("vectorized", 14)]
    assert "cache_read" not in [s.primitive for s in conversion_steps(prog.funcs[back], back, GATHER)]
    tvm.compile(tvm.IRModule({"main": sch.mod["main"]}), target=target_from(AVX512))
    _scheduled_matches(g, book)


def test_the_loops_outside_half_the_l2_do_not_write_between_the_tiles_lines(caches):
    """The 7x7/2 stem's output from 14 H x 2 W tiles -> NCHW (64 channels of 112 W): the streams
    model alone keeps the W blocks outermost (each pass over the image writes one line of every
    channel row); the W blocks go inside the H blocks instead, so the loops inside half the L2
    write whole runs of adjacent lines. (The order model's gather: built for the AMD EPYC.)"""
    g = alt_graph((1, 3, 224, 224), 64, 7, 2, 3)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[14, 2], ot=16, it=1))
    prog = make_program(g, book)
    back = next(k.name for k in conversion_kernels(prog) if k.name == "convert_conv_out")
    steps, loops = _scheduled_loops(prog, back, GATHER)
    # loops: i1 C, i2 H (by the 14-high tiles), i3 W (16-wide blocks of 2-wide tiles)
    order = next(s for s in steps if s.primitive == "reorder").get("loops")
    assert order.index("i2_0") < order.index("i3_0") < order.index("i2_1"), order
    access = CopyAccess.of(prog.funcs[back], back, list_loops(prog.funcs[back], back))
    cache = Cache.of(4)
    extents = [lp.extent for lp in list_loops(prog.funcs[back], back)]
    assert order_model._dense([], [], extents, access, cache) is None  # nothing to close
    _scheduled_matches(g, book, GATHER)


@pytest.mark.parametrize("target", [GATHER, AVX512])
def test_an_output_beyond_the_l2_writes_its_rows_whole_where_the_reads_stay_long(caches, monkeypatch, target):
    """The 7x7/2 stem's output from 4 H x 16 W tiles -> NCHW (64 channels of 112 W, 3.2 MB): the
    streams model puts the tile's 4 rows inside the W blocks (the source read 4 KiB at a time,
    each channel's 4 rows written a line at a time, in passes); the W blocks trade places with
    them, each row written whole while the source is read in 1 KiB runs. A destination inside the L2 keeps the model's order."""
    g = alt_graph((1, 3, 224, 224), 64, 7, 2, 3)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[4, 16]))
    prog = make_program(g, book)
    # loops: i1 C, i2 H (by the 4-high tiles), i3 W (by the 16-wide tiles)
    steps = conversion_steps(prog.funcs["convert_conv_out"], "convert_conv_out", target)
    order = next(s for s in steps if s.primitive == "reorder").get("loops")
    assert order.index("i2_0") < order.index("i2_1") < order.index("i3_0"), order
    _scheduled_matches(g, book, target)
    # the same output (3 MiB) inside an L2 of 4 MiB
    monkeypatch.setattr(traffic, "cache_info", lambda: ({"L1d": 32 << 10, "L2": 4 << 20, "L3": 32 << 20}, 64, ""))
    steps = conversion_steps(prog.funcs["convert_conv_out"], "convert_conv_out", target)
    order = next(s for s in steps if s.primitive == "reorder").get("loops")
    assert order.index("i3_0") < order.index("i2_1"), order


@pytest.mark.parametrize("case", ["nchw16c back", "alt output", "alt unfold", "odd sizes"])
def test_transposes_of_tiled_or_odd_buffers_keep_the_order_model(case):
    """Rows read from the source's tiles (NCHW16c -> NCHW, ALT's tiled output, ALT's unfold
    reading a tile's row at a time, which the register tile does not speed up) and extents that 4 does
    not divide take no transpose's register tile (built for the AMD EPYC, whose gathered rows
    take none either)."""
    if case == "nchw16c back":
        g = cv_graph((2, 32, 8, 48))
        book = apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "relu2", factor=16))
        prog = make_program(g, book)
        kernels = [k.name for k in conversion_kernels(prog)]
    elif case == "odd sizes":
        g = cv_graph(ODD)
        book = apply_actions(g, LayoutBook(), preset_actions(g, "channels_last", "data"))
        prog = make_program(g, book)
        kernels = [k.name for k in conversion_kernels(prog)]
    else:
        prog, unfold, back = _alt_kernels((1, 16, 16, 64), [4, 16])
        kernels = [back if case == "alt output" else unfold]
    assert kernels
    for name in kernels:
        assert transposed(CopyAccess.of(prog.funcs[name], name, list_loops(prog.funcs[name], name)),
                                   [lp.extent for lp in list_loops(prog.funcs[name], name)]) is None
        assert "cache_read" not in [s.primitive for s in conversion_steps(prog.funcs[name], name, GATHER)]


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
    _scheduled_matches(g, book)
