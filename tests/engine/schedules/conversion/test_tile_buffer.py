"""Rows gathered across the source's tiles go through a tile buffer (``conversion.tile_buffer``)
written back whole, and match the reference."""

from __future__ import annotations

from tests.engine.schedules.conversion.checks import AVX2, GATHER, scheduled_matches
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import vector_unit
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.schedules.conversion.steps import conversion_steps
from workbench.engine.schedules.conversion.traffic import Cache


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
    scheduled_matches(g, book, target=GATHER)
    g, book = conv(big, ("blocked", "data@conv", {"factor": 16}), ("blocked", "conv", {"factor": 16}))
    assert "cache_write" not in [s.primitive for s in steps_of(g, book)]
    g, book = conv((1, 8, 16, 16), ("alt_tiled", "conv", {"tiles": [4, 16], "ot": 16, "it": 8}))
    assert "cache_write" not in [s.primitive for s in steps_of(g, book)]
