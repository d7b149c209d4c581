"""The stand-alone conversion kernels of a measured program as rates (``conversions.conversion_rates``):
the bytes each reads and writes, against the copy bandwidth given. No timing is measured."""

import numpy as np
import pytest

from tests.engine.schedules.graphs import ODD, alt_graph, conversion_kernels, cv_graph
from workbench.engine.layout.book import LayoutBook
from workbench.engine.measure.conversion_rates import ConversionRate, conversion_rates
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program


def test_conversion_rates_count_the_bytes_read_and_written():
    """data (1x7x9x11) -> NCHW4c (1x2x9x11x4, one channel of padding): 693 elements read, 792
    written; GB/s = bytes / time, against the copy bandwidth given."""
    g = cv_graph(ODD)
    prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, "blocked", "data", factor=4)))
    (k,) = conversion_kernels(prog)
    timings = {name: 0.002 for name in prog.funcs}
    (rate,) = conversion_rates(prog, timings, copy_gbs=10.0)
    assert rate == ConversionRate(k.name, (693 + 792) * 4, 0.002, (693 + 792) * 4 / 0.002e-3 / 1e9,
                                  100 * (693 + 792) * 4 / 0.002e-3 / 1e9 / 10.0)
    assert rate.gbs == pytest.approx(2.97) and rate.percent_of_copy == pytest.approx(29.7)


def test_conversion_rates_count_an_unfolds_halos_as_written():
    """The unfolded input of ALT's tiled conv holds each halo element twice: the kernel writes
    them all; only stand-alone conversions are listed, the conv kernel is not."""
    g = alt_graph((1, 7, 9, 11))
    prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv")))
    timings = {name: 1.0 for name in prog.funcs}
    rates = conversion_rates(prog, timings, copy_gbs=1.0)
    assert [r.name for r in rates] == [k.name for k in conversion_kernels(prog)]
    unfold = prog.plan.buffers[conversion_kernels(prog)[0].outputs[0]].layout.shape
    assert rates[0].bytes == (1 * 7 * 9 * 11 + int(np.prod(unfold))) * 4
    assert int(np.prod(unfold)) > 7 * 11 * 11  # the padded input, halos duplicated
    assert conversion_rates(prog, {"conv": 1.0}, copy_gbs=1.0) == []  # untimed
