"""Destination rows that interleave the source's rows (``conversion.interleaving``): vectorized
along the rows, narrower vectors for short rows, and rows the parallel loop interleaves left whole."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.engine.schedules.conversion.checks import AVX2, AVX512, TARGET, scheduled_matches
from tests.engine.schedules.graphs import alt_graph, conversion_kernels
from workbench.engine.build import codegen
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import vector_unit
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions, apply_layout
from workbench.engine.layout.presets import preset_actions
from workbench.engine.loops.primitives import apply_steps, list_loops
from workbench.engine.schedules.conversion.interleaving import interleaves
from workbench.engine.schedules.conversion.offsets import CopyAccess
from workbench.engine.schedules.conversion.steps import conversion_steps


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
    scheduled_matches(g, book, target)


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
    scheduled_matches(g, book, AVX512)
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
    scheduled_matches(g, book, target)
