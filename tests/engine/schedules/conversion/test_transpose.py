"""Conversions through register tiles (``conversion.transpose``): plain transposes by 4x4 tiles,
channels swept a block at a time and no more than an L1 set holds, tiled outputs' register tiles,
and the cases that keep the order model instead."""

from __future__ import annotations

import pytest
import tvm

from tests.engine.schedules.conversion.checks import (AVX2, AVX512, GATHER, alt_kernels, scheduled_loops,
                                                      scheduled_matches)
from tests.engine.schedules.graphs import ODD, alt_graph, conversion_kernels, cv_graph
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import target_from
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.loops.primitives import apply_steps, list_loops
from workbench.engine.schedules.conversion import transpose
from workbench.engine.schedules.conversion.offsets import CopyAccess
from workbench.engine.schedules.conversion.steps import conversion_steps
from workbench.engine.schedules.conversion.transpose import transposed


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
    _, loops = scheduled_loops(prog, k.name)
    assert [lp.extent for lp in loops[-2:]] == [16, 8]  # W.i under C.i's vector
    assert loops[-2].name.startswith("i3")


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
    scheduled_matches(g, book)


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
    scheduled_matches(g, book)


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
    scheduled_matches(g, book, target)  # these steps, built for the host
    scheduled_matches(g, book, GATHER)


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
    scheduled_matches(g, book)


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
        prog, unfold, back = alt_kernels((1, 16, 16, 64), [4, 16])
        kernels = [back if case == "alt output" else unfold]
    assert kernels
    for name in kernels:
        assert transposed(CopyAccess.of(prog.funcs[name], name, list_loops(prog.funcs[name], name)),
                                   [lp.extent for lp in list_loops(prog.funcs[name], name)]) is None
        assert "cache_read" not in [s.primitive for s in conversion_steps(prog.funcs[name], name, GATHER)]
