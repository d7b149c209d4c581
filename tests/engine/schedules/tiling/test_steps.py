"""The expert template's loop steps (``tiling.steps``, through ``expert.expert_steps``): every op type x
layout template, on shapes whose dims do not divide the tiles (7x7 outputs, 3 or 5 channels,
prime sizes), verified against the reference on this machine and built for AVX-512; the register
tile is visible in the loops."""

from __future__ import annotations

import pytest
import tvm

from tests.engine.schedules.graphs import conv_graph, depthwise_graph
from workbench.engine.base.errors import LoopError
from workbench.engine.schedules.expert import expert_steps
from workbench.engine.schedules.tiling.steps import _example, analyse, main_block, plan
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.loops.primitives import apply_steps, list_blocks, list_loops
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import Program, make_program
from workbench.engine.build.targets import target_from, vector_unit

HOST = {"kind": "llvm", "num-cores": 2}
AVX512 = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}


def _tconv_graph(nd: int, cin: int, cout: int, size: int):
    b = GraphBuilder(f"t{nd}d")
    x = b.input("data", (1, cin, *(size,) * nd), "NC" + "DHW"[3 - nd:])
    b.op("tconv", f"conv_transpose{nd}d", x, b.const("tconv.weight", (cin, cout, *(4,) * nd), "IO" + "DHW"[3 - nd:]),
         stride=2, padding=1)
    return b.build(), "tconv"


def _batched_conv(n: int, cin: int, cout: int, size: int):
    """A plain 3x3 conv, padding 1, on ``n`` images."""
    b = GraphBuilder("batched")
    x = b.input("data", (n, cin, size, size), "NCHW")
    b.op("conv", "conv2d", x, b.const("conv.weight", (cout, cin, 3, 3), "OIHW"), padding=1)
    return b.build(), "conv"


def _gmm_graph(m: int, k: int, n: int):
    b = GraphBuilder("gmm")
    b.op("gmm", "matmul", b.input("a", (m, k), "MK"), b.const("gmm.weight", (k, n), "KN"))
    return b.build(), "gmm"


#: op cases (small, dims that do not divide the tiles) and the layout templates tried on each
CASES = {
    "c2d": lambda: conv_graph(2, 3, 20, 9, 3, epilogue=True),              # 7x7 out, 3 in channels
    "c2d_pad": lambda: conv_graph(2, 8, 16, 7, 3, padding=1),
    "c2d_s2": lambda: conv_graph(2, 5, 13, 11, 3, stride=2),                # prime out channels
    "dep": lambda: conv_graph(2, 24, 24, 7, 3, padding=1, groups=24, depthwise=True),
    # planes enough to pad one per parallel iteration (odd sizes)
    "dep_planes": lambda: conv_graph(2, 17, 17, 15, 3, padding=1, groups=17, depthwise=True),
    "dep_s2": lambda: conv_graph(2, 16, 16, 19, 3, padding=1, stride=2, groups=16, depthwise=True),
    "grp": lambda: conv_graph(2, 16, 16, 7, 3, padding=1, groups=4),
    "dil": lambda: conv_graph(2, 8, 8, 11, 3, padding=2, dilation=2),
    "c1d": lambda: conv_graph(1, 6, 17, 29, 3, padding=1),
    "c3d": lambda: conv_graph(3, 4, 8, 5, 3, padding=1),
    "t2d": lambda: _tconv_graph(2, 8, 12, 5),
    "t3d": lambda: _tconv_graph(3, 4, 8, 3),
    "gmm": lambda: _gmm_graph(13, 37, 40),
}
LAYOUTS = {
    "default": lambda g, op: [],
    "channels_last": lambda g, op: (preset_actions(g, "channels_last", op)
                                    + preset_actions(g, "channels_last", f"data@{op}")),
    "blocked": lambda g, op: preset_actions(g, "blocked", op, factor=8),
    "alt_tiled": lambda g, op: preset_actions(g, "alt_tiled", op, tiles=3, ot=8, it=4),
    # ALT's tiled input and weight, the output kept in its layout (written from the register tile)
    "alt_tiled_in": lambda g, op: preset_actions(g, "alt_tiled", op, tiles=3, ot=8, it=4, tile_out=False),
    "nkn": lambda g, op: preset_actions(g, "nkn", op, m=4, n=16),
}
PAIRS = [(c, lay) for c in CASES if c != "gmm" for lay in ("default", "channels_last", "blocked", "alt_tiled",
                                                           "alt_tiled_in")
         if not (c.startswith("t") and lay == "channels_last")] + [("gmm", "default"), ("gmm", "nkn")]


def _program(case: str, layout: str) -> Program:
    graph, op = CASES[case]()
    return make_program(graph, apply_actions(graph, LayoutBook(), LAYOUTS[layout](graph, op)))


def _expert(prog: Program, target: dict) -> tuple[Program, dict[str, list]]:
    """The program with every complex-op kernel expert-scheduled, and the steps per kernel."""
    steps = {k.name: expert_steps(prog.funcs[k.name], k.name, target) for k in prog.plan.kernels
             if main_block(prog.funcs[k.name])}
    assert steps, "no complex-op kernel"
    return prog.with_funcs({k: apply_steps(prog.funcs[k], s).mod["main"] for k, s in steps.items()}), steps


#: layouts the fast lane (``make test-fast``) leaves to ``make test``: every case keeps its default
#: layout and ALT's tiled ones there
SLOW_LAYOUTS = {"channels_last", "blocked"}


@pytest.mark.parametrize("case,layout", [pytest.param(c, lay, id=f"{c}-{lay}",
                                                      marks=[pytest.mark.slow] * (lay in SLOW_LAYOUTS))
                                         for c, lay in PAIRS])
def test_expert_schedule_matches_reference(case: str, layout: str) -> None:
    prog, _ = _expert(_program(case, layout), HOST)
    result = prog.build(HOST).verify()
    assert result.ok, result


@pytest.mark.parametrize("case,layout", [("c2d", "blocked"), ("dep", "alt_tiled"), ("t2d", "alt_tiled"),
                                         ("gmm", "nkn"), ("c3d", "default")])
def test_expert_schedule_builds_for_avx512(case: str, layout: str) -> None:
    prog, steps = _expert(_program(case, layout), AVX512)
    for kernel, ss in steps.items():
        sch = apply_steps(_program(case, layout).funcs[kernel], ss)
        vectorized = [lp for b in list_blocks(sch) for lp in list_loops(sch, b) if lp.kind == "vectorized"]
        assert vectorized and all(lp.extent <= 16 for lp in vectorized)
    tvm.compile(prog.module(), target=target_from(AVX512))  # build only: this machine may lack AVX-512


@pytest.mark.parametrize("target", [HOST, AVX512], ids=["host", "avx512"])
def test_register_tile_is_vectorized_and_unrolled(target: dict) -> None:
    func = _example(64)[0]  # C = A @ B, 64 x 64 x 64
    sch = apply_steps(func, expert_steps(func, "mm", target))
    loops = list_loops(sch, "C_update")
    unit = vector_unit(target)
    assert loops[-1].kind == "vectorized" and loops[-1].extent == unit.lanes
    tile = [lp for lp in loops if lp.kind == "unrolled"]
    assert tile and all(not lp.reduction for lp in tile)
    accumulators = 1
    for lp in tile:
        accumulators *= lp.extent
    assert accumulators + 1 + 1 <= unit.registers  # one broadcast, at least one vector operand
    assert any(lp.kind == "parallel" for lp in loops)
    assert {"C_local", "C_init"} <= set(list_blocks(sch))  # the tile is a local buffer, zeroed once


@pytest.mark.parametrize("target", [HOST, AVX512], ids=["host", "avx512"])
@pytest.mark.parametrize("case,width", [("dep", 28), ("grp", 0), ("dep_s2", 0)],
                         ids=["depthwise", "grouped", "depthwise-stride-2"])
def test_a_row_that_does_not_divide_the_lanes(target: dict, case: str, width: int) -> None:
    """On NCHW, 28 wide (not a multiple of 8 or 16 lanes): the depthwise conv, whose rows share
    no loads, vectorizes its whole row; the grouped conv, whose output channels share the input's
    loads, and the depthwise conv of stride 2, whose rows gather, keep vectors no wider than a
    register. All match the reference."""
    graph, op = {"dep": lambda: conv_graph(2, 16, 16, 28, 3, padding=1, groups=16, depthwise=True),
                 "grp": lambda: conv_graph(2, 16, 16, 28, 3, padding=1, groups=4),
                 "dep_s2": lambda: conv_graph(2, 16, 16, 56, 3, padding=1, groups=16, depthwise=True, stride=2)}[case]()
    prog = make_program(graph)
    sch = apply_steps(prog.funcs[op], expert_steps(prog.funcs[op], op, target))
    vectors = [lp.extent for lp in list_loops(sch, "conv_update") if lp.kind == "vectorized"]
    lanes = vector_unit(target).lanes
    assert vectors == [width] if width else (len(vectors) == 1 and vectors[0] <= lanes)
    if target is HOST:
        assert prog.with_funcs({op: sch.mod["main"]}).build(HOST).verify().ok


@pytest.mark.parametrize("target", [HOST, AVX512], ids=["host", "avx512"])
def test_depthwise_rows_slide_along_the_kernel_taps(target: dict) -> None:
    """Output row h at tap kh reads input row h + kh: with kh unrolled inside the rows, the rows
    and taps share their loads (the tile slides). The loop order ends kh, rows, lanes."""
    graph, op = depthwise_graph(14)
    func = make_program(graph).funcs[op]
    tile = plan(analyse(func), vector_unit(target), 32768)
    assert tile.slide == "rk0" and tile.rows > 1  # kh beside the output rows
    sch = apply_steps(func, expert_steps(func, op, target))
    loops = list_loops(sch, "conv_update")
    assert [lp.kind for lp in loops[-3:]] == ["unrolled", "unrolled", "vectorized"]
    assert loops[-3].reduction and loops[-3].extent == 3 and not loops[-2].reduction
    if target is HOST:
        assert make_program(graph).with_funcs({op: sch.mod["main"]}).build(HOST).verify().ok


@pytest.mark.parametrize("target", [HOST, AVX512], ids=["host", "avx512"])
def test_a_grouped_conv_tiles_one_group_at_a_time(target: dict) -> None:
    """4 channels per group: the output channels share the input's loads within a group only, so
    the tile holds at most 4 of them and the loop over groups runs outermost (parallel), the
    output rows inside it reusing the group's input."""
    graph, op = conv_graph(2, 32, 32, 28, 3, padding=1, groups=8)
    func = make_program(graph).funcs[op]
    tile = plan(analyse(func), vector_unit(target), 32768)
    assert tile.rows_loop == "i1" and tile.rows == 4  # output channels: one group
    sch = apply_steps(func, expert_steps(func, op, target))
    outer = [lp for lp in list_loops(sch, "conv_update") if lp.extent > 1][0]
    assert outer.kind == "parallel" and outer.name == "i1_0"  # the groups' loop
    if target is HOST:
        assert make_program(graph).with_funcs({op: sch.mod["main"]}).build(HOST).verify().ok


@pytest.mark.parametrize("target", [HOST, AVX512], ids=["host", "avx512"])
def test_a_padding_stage_runs_under_the_parallel_loop_only_where_its_iterations_read_slices_of_their_own(
        target: dict) -> None:
    """A grouped conv's loop over groups reads one group's padded channels per iteration: its pad
    stage is computed there (one parallel region, each element once). A depthwise conv's
    iterations over blocks of output rows would compute their shared halo rows twice: its
    parallel loop runs over (images and) channels only, the blocks of rows serial inside it, and
    pads one channel plane per iteration; with too few planes to share among the cores its pad
    stays a parallel pass of its own, as does a batched plain conv's (its images share the
    weights: each would pad a whole image)."""
    cases = {"grouped": (conv_graph(2, 32, 32, 28, 3, padding=1, groups=8), True),
             "depthwise": (conv_graph(2, 24, 24, 28, 3, padding=1, groups=24, depthwise=True), True),
             "few planes": (conv_graph(2, 8, 8, 28, 3, padding=1, groups=8, depthwise=True), False),
             "batched plain": (_batched_conv(16, 8, 16, 14), False)}
    for name, ((graph, op), inside) in cases.items():
        func = make_program(graph).funcs[op]
        steps = expert_steps(func, op, target)
        assert any(s.primitive == "compute_at" and s.get("block") == "conv_input_pad" for s in steps) == inside, name
        sch = apply_steps(func, steps)
        pad = list_loops(sch, "conv_input_pad")
        conv = [lp for lp in list_loops(sch, "conv_update") if lp.kind == "parallel"]
        assert [lp.name for lp in pad if lp.kind == "parallel"] == ([conv[0].name] if inside else [pad[0].name]), name
        if name == "depthwise":  # the images and channels only, the rows inside
            assert conv[0].extent == 24 and any(lp.name.startswith("i2") for lp in list_loops(sch, "conv_update"))
        if target is HOST:
            assert make_program(graph).with_funcs({op: sch.mod["main"]}).build(HOST).verify().ok, name


@pytest.mark.parametrize("target", [HOST, AVX512], ids=["host", "avx512"])
def test_a_stride_2_conv_with_many_channel_rows_matches_the_reference(target: dict) -> None:
    graph, op = conv_graph(2, 8, 24, 15, 3, epilogue=True, stride=2)
    prog, _ = _expert(make_program(graph), target)
    if target is HOST:
        assert prog.build(HOST).verify().ok
    else:
        tvm.compile(prog.module(), target=target_from(AVX512))


def test_a_tile_whose_vector_is_not_the_outputs_contiguous_dim_is_stored_vector_last() -> None:
    """ALT's tiled input and weight with the output kept in NCHW: the vector is the output
    channels, so the register tile is stored channels-last (each of its vectors contiguous); on
    NCHW alone the vector is the output's rows and the tile keeps the output's layout."""
    graph, op = conv_graph(2, 8, 32, 9, 3, padding=1)
    acts = preset_actions(graph, "alt_tiled", op, tiles=3, ot=16, it=4, tile_out=False)
    prog, steps = _expert(make_program(graph, apply_actions(graph, LayoutBook(), acts)), HOST)
    assert prog.build(HOST).verify().ok
    (tl,) = [s for ss in steps.values() for s in ss if s.primitive == "transform_layout"]
    assert tl.kwargs["perm"] == [0, 2, 3, 1] and tl.kwargs["factors"] == [1, 1, 1, 1]
    _, steps = _expert(_program("c2d_pad", "default"), HOST)
    assert not [s for ss in steps.values() for s in ss if s.primitive == "transform_layout"]


def test_epilogue_is_applied_on_the_tile() -> None:
    prog = _program("c2d", "default")
    kernel = next(k for k in prog.plan.kernels if "conv" in k.ops)
    assert {"bias", "relu"} <= set(kernel.ops)
    sch = apply_steps(prog.funcs[kernel.name], expert_steps(prog.funcs[kernel.name], kernel.name, HOST))
    assert not {"bias", "relu"} & set(list_blocks(sch))  # inlined into the tile's write-back


def test_gemm_tile_fits_the_registers() -> None:
    a = analyse(_example(64)[0])
    assert [r.buffer for r in a.reads] == ["A", "B"] and a.write.strides == {"i": 64, "j": 1, "k": 0}
    steps = expert_steps(_example(64)[0], "mm", {"kind": "llvm", "mcpu": "haswell"})
    assert str(steps[0]).startswith("split(block='C', loop='j', factors=[None,")
    assert steps[-1].primitive == "decompose_reduction"


def test_already_scheduled_kernel_is_refused() -> None:
    func = _example(64)[0]
    scheduled = apply_steps(func, expert_steps(func, "mm", HOST)).mod["main"]
    with pytest.raises(LoopError, match="already scheduled"):
        expert_steps(scheduled, "mm", HOST)


def test_steps_replay_in_a_session() -> None:
    from workbench.engine.session.session import new_session, replay

    state = replay(new_session("c1d"))
    kernel = next(k.name for k in state.program.plan.kernels if main_block(state.program.funcs[k.name]))
    for step in expert_steps(state.program.funcs[kernel], kernel, state.session.target):
        state = state.push(step)
    assert state.scheduled_program().build(state.session.target).verify().ok


def test_an_epilogue_that_writes_the_next_convs_padded_tiles_keeps_its_zero_border() -> None:
    """conv1's kernel writes conv2's tiled input (halo padding included). TVM's
    reverse_compute_at would drop the border iterations (they read no tile), leaving them
    unwritten; the expert schedule keeps that epilogue a pass of its own."""
    from workbench.engine.models import zoo
    from workbench.engine.build.agreement import disagreement

    g = zoo.load("r18_block")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv2", tiles=[56, 56], ot=16, it=16))  # one tile: a 58x58 halo
    prog = make_program(g, book)
    kernel = next(k for k in prog.plan.kernels if "conv1" in k.ops)
    assert prog.plan.buffers[kernel.outputs[0]].layout.advanced
    func = prog.funcs[kernel.name]
    scheduled = apply_steps(func, expert_steps(func, kernel.name, HOST)).mod["main"]
    assert disagreement(func, scheduled, len(kernel.outputs), HOST) is None
    assert prog.with_funcs({kernel.name: scheduled}).build(HOST).verify().ok


def _tconv(cin: int, cout: int, size: int, k: int, stride: int, padding: int, nd: int = 2):
    b = GraphBuilder("tconv")
    x = b.input("data", (1, cin, *(size,) * nd), "NC" + "DHW"[3 - nd:])
    b.op("tconv", f"conv_transpose{nd}d", x, b.const("tconv.weight", (cin, cout, *(k,) * nd), "IO" + "DHW"[3 - nd:]),
         stride=stride, padding=padding)
    return b.build()


@pytest.mark.parametrize("cin,cout,size,k,stride,padding,phased", [
    (16, 16, 8, 4, 2, 1, True),    # DCGAN-like: 16x16 out, both spatial loops split by phase
    (5, 7, 5, 3, 3, 0, True),      # stride 3, odd channels: 15x15 out
    (4, 6, 5, 3, 2, 1, False),     # 9x9 out: the stride does not divide it, no phase split
], ids=["s2", "s3", "odd_out"])
def test_transposed_conv_on_its_stored_layout_runs_by_stride_phase(cin, cout, size, k, stride, padding, phased):
    """On NCHW a transposed conv reads its input at (y + p) // s: the expert splits y = s*q + r,
    vectorizes along q (input contiguous, weight broadcast) and stores its register tile by phase
    (``transform_layout``), so that the tile is one box of the output; verified numerically."""
    g = _tconv(cin, cout, size, k, stride, padding)
    prog = make_program(g)
    func = prog.funcs["tconv"]
    steps = expert_steps(func, "tconv", HOST)
    # stored by phase (factors of the stride; all-ones factors only move the vector's dim last)
    layouts = [s for s in steps if s.primitive == "transform_layout" and set(s.get("factors")) != {1}]
    assert bool(layouts) == phased
    if phased:
        assert [s.get("factors") for s in steps if s.primitive == "split"][:2] == [[None, stride]] * 2
        assert layouts[0].get("factors") == [1, 1, stride, stride] and layouts[0].get("perm") == [0, 1, 3, 5, 2, 4]
        vector = [lp for lp in list_loops(apply_steps(func, steps), "tconv_update") if lp.kind == "vectorized"]
        assert len(vector) == 1 and vector[0].name.startswith("i3_0")  # along q of the output width
    result = prog.with_funcs({"tconv": apply_steps(func, steps).mod["main"]}).build(HOST).verify()
    assert result.ok, result


@pytest.mark.parametrize("nd,tiles", [(2, [4, 8]), (3, [4, 4, 8])], ids=["t2d", "t3d"])
@pytest.mark.parametrize("target", [HOST, AVX512], ids=["host", "avx512"])
def test_transposed_conv_on_alts_tiles_runs_its_rows_along_the_phases(nd: int, tiles: list[int], target: dict) -> None:
    """On ALT's tiled layout (output channels innermost, the weight's too) the vector is the
    output channels and the rows run along q of y = s*q + r: the phases sit outside the reduction,
    the weight's output-channel blocks outermost, the taps unrolled inside the channel loop; no
    tile stored by phase (its vectors are contiguous already); verified numerically."""
    g = _tconv(8, 16, 4, 4, 2, 1, nd=nd)  # 8^nd outputs
    acts = preset_actions(g, "alt_tiled", "tconv", tiles=tiles, ot=8, it=4)
    weight = [a for a in acts if a.target == "tconv.weight"]
    # the weight (I, O, *K) = (8, 16, 4...) stored (O/8, I/4, *K, 4, 8): its output channels innermost
    assert [(a.get("dim"), a.get("factors")) for a in weight[:2]] == [(1, [-1, 8]), (0, [-1, 4])]
    assert weight[2].get("perm") == [2, 0, *range(4, nd + 4), 1, 3]
    prog = make_program(g, apply_actions(g, LayoutBook(), acts))
    func = prog.funcs["tconv"]
    steps = expert_steps(func, "tconv", target)
    assert not [s for s in steps if s.primitive == "transform_layout"]
    loops = list_loops(apply_steps(func, steps), "tconv_update")
    names, kinds = [lp.name for lp in loops], {lp.name: lp.kind for lp in loops}
    # output (N, tiles..., O/8, tile dims..., 8): loops i0, i1..i{nd} tiles, i{nd+1} the O blocks
    vector = [lp for lp in loops if lp.kind == "vectorized"]
    assert len(vector) == 1 and vector[0].name == f"i{2 * nd + 2}"  # the output channels in the tile
    assert loops[-2].kind == "unrolled" and loops[-2].name == f"i{2 * nd + 1}_0"  # rows: q of the last dim
    phases = [f"i{nd + 2 + j}_1" for j in range(nd)]
    assert all(kinds[p] == "unrolled" for p in phases) and max(map(names.index, phases)) < names.index("rc")
    assert all(kinds[f"rt{j}"] == "unrolled" for j in range(nd)) and kinds["rc"] == "serial"
    parallel = next(lp for lp in loops if lp.kind == "parallel")
    assert parallel.name.startswith(f"i{nd + 1}")  # the weight's output-channel blocks outermost
    prog = prog.with_funcs({"tconv": apply_steps(func, steps).mod["main"]})
    if target is HOST:
        result = prog.build(HOST).verify()
        assert result.ok, result
    else:
        tvm.compile(prog.module(), target=target_from(target))
