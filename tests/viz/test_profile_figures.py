"""Profile figures from hand-made data: the roofline's roofs and variant markers, the footprint's
cache lines, the misses bars."""

from __future__ import annotations

import re

import plotly.graph_objects as go
import pytest

from workbench.engine.measure.ceilings import Ceilings
from workbench.engine.measure.footprint import BufferFootprint, Level, Profile
from workbench.engine.measure.roofline import RooflinePoint
from workbench.viz.cache import footprint_figure, misses_figure
from workbench.viz.kernels import latency_bars_figure
from workbench.viz.roofline import roofline_figure, roofline_table

KIB = 1024
CEIL = Ceilings("test cpu", {"kind": "llvm"}, peak_gflops=100.0, copy_gbs=10.0, triad_gbs=12.0,
                caches={"L1d": 32 * KIB, "L2": 1024 * KIB, "L3": 8192 * KIB}, line_bytes=64)


def below(fig: go.Figure) -> bool:
    """The legend sits under the plot, across it, at the figure's bottom (not at its right)."""
    legend = fig.layout.legend
    return legend.orientation == "h" and legend.yref == "container" and legend.y == 0 and legend.yanchor == "bottom"


def _points(fig: go.Figure) -> list:
    """The roofline's kernel markers (not the roofs, the legend's entries or the library stars)."""
    return [t for t in fig.data if t.showlegend is False and t.legendgroup != "library"]


def test_roofline_draws_both_roofs_and_groups_variants_of_a_kernel():
    pts = [RooflinePoint("conv", "NCHW", 2 * 10**8, 4 * 10**6, 40.0),
           RooflinePoint("conv", "tiled", 2 * 10**8, 4 * 10**6, 6.0),
           RooflinePoint("relu", "NCHW", 10**6, 8 * 10**6, 1.0),
           RooflinePoint("pad", "NCHW", 0, 10**6, 0.1),        # no FLOPs: not on a FLOP roofline
           RooflinePoint("conv", "untimed", 2 * 10**8, 4 * 10**6, None)]
    fig = roofline_figure(pts, CEIL)
    assert isinstance(fig, go.Figure)
    names = [t.name for t in fig.data]
    assert names[1:3] == ["bandwidth ceiling", "compute ceiling"]
    assert names[3:] == ["NCHW", "tiled", "conv · NCHW", "conv · tiled", "relu · NCHW"]  # the legend, then markers
    nchw, tiled, relu = _points(fig)
    assert nchw.marker.color == tiled.marker.color and relu.marker.color != nchw.marker.color  # a colour per kernel
    assert nchw.marker.symbol == relu.marker.symbol != tiled.marker.symbol  # a symbol per variant
    assert nchw.legendgroup == relu.legendgroup == "NCHW" != tiled.legendgroup  # a click hides a variant
    assert "% of the compute roof" in tiled.hovertemplate and "% of the memory roof" in relu.hovertemplate
    assert max(fig.data[2].y) == 100.0 and fig.layout.xaxis.type == fig.layout.yaxis.type == "log"


#: a variant as a tab names it, and its whole action chain (a hundred characters and more)
CHAIN = ("conv: split, split, reorder, fuse · data@conv: unfold, pad · conv: parallel, vectorize, unroll · "
         "relu: fuse, parallel, vectorize")


def test_roofline_names_variants_short_in_its_legend_below_the_plot_and_whole_on_hover():
    """The legend lists v1, v2 under the plot (the plot keeps the figure's width); each marker's
    hover holds its variant's whole chain; a variant named before short names (``v1: <chain>``)
    shows as v1 too; each kernel is labelled once, beside its newest variant's marker."""
    pts = [RooflinePoint("conv", f"v1: {CHAIN[:60]}", 2 * 10**8, 4 * 10**6, 40.0),
           RooflinePoint("relu", f"v1: {CHAIN[:60]}", 10**6, 8 * 10**6, 1.0),
           RooflinePoint("conv", "v2", 2 * 10**8, 4 * 10**6, 6.0)]
    fig = roofline_figure(pts, CEIL, chains={"v2": CHAIN})
    entries = [t.name for t in fig.data if t.showlegend is not False]
    assert entries[3:] == ["v1", "v2"] and all(len(n) < 40 for n in entries)
    assert below(fig)
    old_conv, relu, new_conv = _points(fig)
    assert [t.name for t in (old_conv, relu, new_conv)] == ["conv · v1", "relu · v1", "conv · v2"]
    shown = re.sub(r"<br>", " ", new_conv.hovertemplate)
    assert CHAIN in shown and max(len(line) for line in new_conv.hovertemplate.split("<br>")) <= 80
    assert CHAIN[:60] in re.sub(r"<br>", " ", old_conv.hovertemplate)
    assert old_conv.text is None and list(new_conv.text) == ["conv"] and list(relu.text) == ["relu"]


def test_the_roofline_table_puts_the_key_columns_first_with_short_variant_names():
    pts = [RooflinePoint("conv", f"v1: {CHAIN}", 2 * 10**8, 4 * 10**6, 40.0),
           RooflinePoint("pad", "v2", 0, 10**6, 0.1)]
    conv, pad = roofline_table(pts, CEIL)
    assert list(conv)[:5] == ["kernel", "variant", "latency ms", "GFLOP/s", "% of roof"]
    assert set(conv) == set(pts[0].row(CEIL)) and conv["variant"] == "v1" and pad["variant"] == "v2"
    assert conv["GFLOP/s"] == pytest.approx(5.0) and conv["% of roof"] == pytest.approx(5.0)  # 2e8 FLOP in 40 ms


def test_latency_bars_name_variants_short_with_the_chain_on_hover_and_the_legend_below():
    fig = latency_bars_figure({f"v1: {CHAIN}": {"conv": 9.0}, "v2": {"conv": 4.0}}, chains={"v2": CHAIN})
    assert [t.name for t in fig.data] == ["v1", "v2"]
    assert CHAIN in re.sub(r"<br>", " ", fig.data[1].hovertemplate)
    assert below(fig)


def test_the_library_gemms_labels_sit_apart():
    """Two libraries at one intensity and about one rate: one label below its star, the other above."""
    from dataclasses import replace

    from workbench.engine.measure.ceilings import Yardstick

    ceil = replace(CEIL, library=(Yardstick("PyTorch", 2048, 210.0, 2), Yardstick("NumPy", 2048, 205.0, 2)))
    refs = {t.name: t.textposition for t in roofline_figure([], ceil).data if t.legendgroup == "library"}
    assert refs == {"NumPy GEMM 2048 (library)": "bottom left", "PyTorch GEMM 2048 (library)": "top left"}


def _profile(name: str, l1_misses: int) -> Profile:
    fp = lambda n: BufferFootprint(n // 4, n, max(1, n // 64), 1)  # noqa: E731
    levels = [Level(0, "(kernel)", 1, 1, {"x": fp(4 * KIB * KIB), "y": fp(KIB * KIB)}),
              Level(1, "i", 64, 64, {"x": fp(64 * KIB), "y": fp(16 * KIB)}),
              Level(2, "j", 16, 1024, {"x": fp(256), "y": fp(64)})]
    misses = {c: {"misses (lines)": l1_misses * (i + 1), "misses (prefetch-aware)": l1_misses // 8}
              for i, c in enumerate(["L1d", "L2"])}
    return Profile(name, levels, {"L1d": 32 * KIB, "L2": 1024 * KIB}, 64, misses)


def test_footprint_figure_has_a_line_per_buffer_and_the_total_against_the_caches():
    fig = footprint_figure(_profile("k", 100))
    assert [t.name for t in fig.data] == ["x", "y", "total", "L1d 32 KiB", "L2 1 MiB"]  # caches in the legend
    assert below(fig)
    assert list(fig.data[2].y) == [5 * KIB * KIB, 80 * KIB, 320]
    assert [set(t.y) for t in fig.data[3:]] == [{32 * KIB}, {1024 * KIB}]
    with_ceilings = footprint_figure(_profile("k", 100), CEIL)  # the machine's three caches
    assert [t.name for t in with_ceilings.data[3:]] == ["L1d 32 KiB", "L2 1 MiB", "L3 8 MiB"]
    assert with_ceilings.layout.yaxis.type == "log"


def test_misses_figure_has_one_bar_trace_per_variant():
    fig = misses_figure({"NCHW": _profile("conv", 800), "tiled": _profile("conv", 80)})
    assert [t.name for t in fig.data] == ["NCHW", "tiled"] and below(fig)
    assert list(fig.data[0].x) == ["L1d (all lines)", "L2 (all lines)", "L1d (prefetch-aware)",
                                   "L2 (prefetch-aware)"]
    assert list(fig.data[0].y) == [800, 1600, 100, 100] and list(fig.data[1].y) == [80, 160, 10, 10]


def test_a_kernel_above_its_roof_says_why_on_hover():
    # 0.1 MFLOP over 64 KiB in 1 us: 100 GFLOP/s at 1.5 FLOP/B, far above the 12 GB/s roof there
    # (18 GFLOP/s), and its buffers fit L2 (1 MiB), not L1d (32 KiB)
    warm = RooflinePoint("relu", "v1", 10**5, 64 * KIB, 0.001)
    cold = RooflinePoint("conv", "v1", 2 * 10**8, 4 * 10**6, 40.0)
    fig = roofline_figure([warm, cold], CEIL)
    hover = {t.name: t.hovertemplate for t in fig.data[3:]}
    assert warm.percent_of_roof(CEIL) > 100 and warm.holding_cache(CEIL) == "L2"
    assert warm.roof_note(CEIL) in hover["relu · v1"] and "fit L2 (1024 KiB)" in hover["relu · v1"]
    assert cold.roof_note(CEIL) == "" and "<br>above" not in hover["conv · v1"]


def test_misses_bars_name_the_bound_that_set_them():
    prof = _profile("conv", 800)
    prof.misses["L2"]["bounded by"] = "inclusion (L1d)"
    (bars,) = misses_figure({"v": prof}).data
    assert list(bars.customdata) == ["the model's estimate", "inclusion (L1d)"] * 2
    assert "%{customdata}" in bars.hovertemplate


def test_every_measured_point_lies_inside_the_roofline_axes():
    """Points far apart and one far above the measured peak (timed at another clock): each one
    lies within both axes' ranges, so none is cut off."""
    import math

    pts = [RooflinePoint("relu", "v1", 10**5, 8 * 10**7, 10.0),          # 0.01 GFLOP/s at 1/800 FLOP/B
           RooflinePoint("gmm", "v1", 2 * 10**10, 10**6, 20.0),          # 1000 GFLOP/s: ten times the peak
           RooflinePoint("conv", "v2", 2 * 10**8, 4 * 10**6, 6.0)]
    fig = roofline_figure(pts, CEIL)
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    for t in _points(fig):
        assert x0 < math.log10(t.x[0]) < x1 and y0 < math.log10(t.y[0]) < y1, t.name
