"""The order model (``conversion.order``) on ALT's layouts and fixed caches: the loop orders it
picks for tiled outputs and unfolds, whole rows per thread, and outputs beyond the L2."""

from __future__ import annotations

import pytest

from tests.engine.schedules.conversion.checks import (AVX2, AVX512, GATHER, ZEN, alt_kernels, scheduled_loops,
                                                      scheduled_matches, stem_unfold)
from tests.engine.schedules.graphs import alt_graph, conversion_kernels
from workbench.engine.build.program import make_program
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.loops.primitives import list_loops
from workbench.engine.schedules.conversion import order as order_model, traffic, transpose, vendor
from workbench.engine.schedules.conversion.offsets import CopyAccess
from workbench.engine.schedules.conversion.steps import conversion_steps
from workbench.engine.schedules.conversion.traffic import Cache


def test_the_tiled_output_is_read_a_source_tile_at_a_time(caches):
    """N(H/4)(W/16)(C/16)4x16x16 -> NCHW: W is split where the source's 16-wide tiles start, and
    the innermost loops are a 16x16 transpose that writes each channel's line whole (16 W: two
    AVX2 vectors) while it reads the tile's 16 source lines (built for the AMD EPYC, which keeps
    the gather)."""
    prog, _, back = alt_kernels((1, 16, 16, 64), [4, 16])
    steps, loops = scheduled_loops(prog, back, GATHER)
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
    prog, unfold, _ = alt_kernels((1, 64, 16, 112), [4, 16])
    steps, loops = scheduled_loops(prog, unfold)
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
    steps, loops = scheduled_loops(prog, "convert_conv_out", GATHER)
    # loops: i1 C, i2 H (by the 4-high tiles), i3 W (by the 4-wide tiles)
    fused = next(s for s in steps if s.primitive == "fuse").get("loops")
    assert not any(n.startswith("i3") for n in fused) and loops[0].kind == "parallel"
    assert loops[0].extent >= 8 * GATHER["num-cores"]
    order = next(s for s in steps if s.primitive == "reorder").get("loops")
    assert order.index("i2_1") < order.index("i3_0") < order.index("i3_1")
    scheduled_matches(g, book, GATHER)


def test_an_unfold_with_rows_shorter_than_a_line_writes_in_the_destinations_order_on_amd(caches, monkeypatch):
    """ALT's stem unfold with 9-float tile rows (tiles [14, 2], it = 1): the model's tile, the W
    tiles inside each row, would write 9 floats to a page after another; built for the AMD EPYC
    (``znver3``) the destination's order replaces it (it reads as few lines: the window slides 4
    of its 9 floats under the L1, and writes one stream); without that rule (``_TIE`` below zero)
    the model's order comes back. Built for Intel's CPUs the model's order stays."""
    _, _, prog, unfold = stem_unfold()
    steps, loops = scheduled_loops(prog, unfold.name, ZEN)
    assert not any(s.primitive == "reorder" for s in steps)
    assert loops[-1].extent == 9 and loops[-1].kind == "vectorized"
    for intel in (AVX2, AVX512):
        steps, loops = scheduled_loops(prog, unfold.name, intel)
        assert next(s for s in steps if s.primitive == "reorder").get("loops")[-2:] == ["i2", "i5_i6_fused"]
    monkeypatch.setattr(vendor, "_TIE", -1.0)
    steps, _ = scheduled_loops(prog, unfold.name, ZEN)
    assert any(s.primitive == "reorder" for s in steps)


def test_the_loops_outside_half_the_l2_do_not_write_between_the_tiles_lines(caches):
    """The 7x7/2 stem's output from 14 H x 2 W tiles -> NCHW (64 channels of 112 W): the streams
    model alone keeps the W blocks outermost (each pass over the image writes one line of every
    channel row); the W blocks go inside the H blocks instead, so the loops inside half the L2
    write whole runs of adjacent lines. (The order model's gather: built for the AMD EPYC.)"""
    g = alt_graph((1, 3, 224, 224), 64, 7, 2, 3)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[14, 2], ot=16, it=1))
    prog = make_program(g, book)
    back = next(k.name for k in conversion_kernels(prog) if k.name == "convert_conv_out")
    steps, loops = scheduled_loops(prog, back, GATHER)
    # loops: i1 C, i2 H (by the 14-high tiles), i3 W (16-wide blocks of 2-wide tiles)
    order = next(s for s in steps if s.primitive == "reorder").get("loops")
    assert order.index("i2_0") < order.index("i3_0") < order.index("i2_1"), order
    access = CopyAccess.of(prog.funcs[back], back, list_loops(prog.funcs[back], back))
    cache = Cache.of(4)
    extents = [lp.extent for lp in list_loops(prog.funcs[back], back)]
    assert order_model._dense([], [], extents, access, cache) is None  # nothing to close
    scheduled_matches(g, book, GATHER)


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
    scheduled_matches(g, book, target)
    # the same output (3 MiB) inside an L2 of 4 MiB
    monkeypatch.setattr(traffic, "cache_info", lambda: ({"L1d": 32 << 10, "L2": 4 << 20, "L3": 32 << 20}, 64, ""))
    steps = conversion_steps(prog.funcs["convert_conv_out"], "convert_conv_out", target)
    order = next(s for s in steps if s.primitive == "reorder").get("loops")
    assert order.index("i3_0") < order.index("i2_1"), order
