"""The roofline: this machine's compute and bandwidth ceilings as lines, one marker per kernel.

Variants of the same kernel share a colour (one legend group per kernel) and differ by symbol,
so a layout change shows as a marker moving right (more reuse) and up (faster). The libraries'
GEMM measured with the ceilings (``Ceilings.library``) is drawn as labelled reference stars: a
yardstick of what this machine reaches with a vendor kernel. A kernel above its roof says why
on hover (``RooflinePoint.roof_note``: its buffers fit a cache); one above the measured FMA peak
shows that note instead of its share, which only says the peak was measured low.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from .axes import log_axis

if TYPE_CHECKING:
    from workbench.engine.ceilings import Ceilings
    from workbench.engine.roofline import RooflinePoint

__all__ = ["roofline_figure"]

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_SYMBOLS = ("circle", "diamond", "square", "triangle-up", "x", "star", "cross", "pentagon")
_REFERENCE = {"color": "#555", "size": 14, "symbol": "star-open", "line": {"width": 2}}


def roofline_figure(points: Sequence["RooflinePoint"], ceilings: "Ceilings",
                    title: str = "Roofline") -> go.Figure:
    """Log-log GFLOP/s against FLOP/byte; kernels without FLOPs or latency are left out; the
    library GEMMs of ``ceilings`` are labelled reference points."""
    shown = [p for p in points if p.flops > 0 and p.gflops]
    refs = list(ceilings.library)
    xs_all = [p.intensity for p in shown] + [y.intensity for y in refs]
    lo = min(xs_all + [ceilings.ridge / 100]) / 2
    hi = max(xs_all + [ceilings.ridge * 100]) * 2
    xs = np.geomspace(lo, hi, 64)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=np.minimum(ceilings.peak_gflops, xs * ceilings.bandwidth_gbs), mode="lines",
                             name=f"roof: {ceilings.peak_gflops:.0f} GFLOP/s, {ceilings.bandwidth_gbs:.1f} GB/s",
                             line={"color": "#333", "width": 2}))
    fig.add_trace(go.Scatter(x=xs, y=xs * ceilings.bandwidth_gbs, mode="lines", name="bandwidth ceiling",
                             line={"color": "#999", "dash": "dot"}))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[ceilings.peak_gflops] * 2, mode="lines", name="compute ceiling",
                             line={"color": "#999", "dash": "dash"}))
    kernels = list(dict.fromkeys(p.kernel for p in shown))
    variants = list(dict.fromkeys(p.variant for p in shown))
    for p in shown:
        colour = _COLOURS[kernels.index(p.kernel) % len(_COLOURS)]
        note = p.roof_note(ceilings)  # over 100%: why (its data sits in a cache, or the peak was measured low)
        share = "" if p.over_peak(ceilings) else f"{p.percent_of_roof(ceilings):.1f}% of the {p.bound(ceilings)} roof"
        fig.add_trace(go.Scatter(
            x=[p.intensity], y=[p.gflops], mode="markers+text", text=[p.kernel], textposition="top center",
            textfont={"size": 10, "color": colour}, name=f"{p.kernel} · {p.variant}" if p.variant else p.kernel,
            legendgroup=p.kernel, marker={"color": colour, "size": 13, "line": {"width": 1, "color": "#fff"},
                                          "symbol": _SYMBOLS[variants.index(p.variant) % len(_SYMBOLS)]},
            hovertemplate=(f"<b>{p.kernel}</b> {p.variant}<br>%{{x:.2f}} FLOP/byte<br>%{{y:.2f}} GFLOP/s<br>"
                           + "<br>".join(t for t in (share, note) if t) + "<extra></extra>")))
    # the libraries' GEMMs sit at one intensity, often at about the same rate: labels alternate
    # below and above their stars, the slower one's below, so two labels never share a line; to
    # the left, as the stars sit near the plot's right edge
    for i, y in enumerate(sorted(refs, key=lambda r: r.gflops)):
        fig.add_trace(go.Scatter(
            x=[y.intensity], y=[y.gflops], mode="markers+text", name=f"{y.label} (library)", legendgroup="library",
            text=[y.label], textposition=("bottom left", "top left")[i % 2], marker=_REFERENCE,
            hovertemplate=f"<b>{y.label}</b> (library, {y.threads} threads)<br>%{{y:.1f}} GFLOP/s<extra></extra>"))
    ymin = min([p.gflops for p in shown] + [lo * ceilings.bandwidth_gbs]) / 2
    ytop = max([ceilings.peak_gflops] + [y.gflops for y in refs])  # a library may beat the measured roof
    fig.update_layout(title=title, xaxis=log_axis([lo, hi], "arithmetic intensity (FLOP/byte, compulsory traffic)"),
                      # the roof on top, not the extended bandwidth line
                      yaxis=log_axis([ymin, ytop * 3], "GFLOP/s", range=[math.log10(ymin), math.log10(ytop * 3)]),
                      template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig
