"""The roofline: this machine's compute and bandwidth ceilings as lines, one marker per kernel.

Variants of the same kernel share a colour and differ by symbol, so a layout change shows as a
marker moving right (more reuse) and up (faster). The legend, below the plot, names each variant
by its number (one legend group per variant: a click hides it); the hover gives its action chain
and each kernel's name is written beside its newest variant's marker. The libraries'
GEMM measured with the ceilings (``Ceilings.library``) is drawn as labelled reference stars: a
yardstick of what this machine reaches with a vendor kernel. A kernel above its roof says why
on hover (``RooflinePoint.roof_note``: its buffers fit a cache); one above the measured FMA peak
shows that note instead of its share, which only says the peak was measured low.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from .axes import log_axis
from .legend import LEGEND_BELOW, hover_lines, short_name

if TYPE_CHECKING:
    from workbench.engine.measure.ceilings import Ceilings
    from workbench.engine.measure.roofline import RooflinePoint

__all__ = ["KEY_COLUMNS", "roofline_figure", "roofline_table"]

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_SYMBOLS = ("circle", "diamond", "square", "triangle-up", "x", "star", "cross", "pentagon")
_REFERENCE = {"color": "#555", "size": 14, "symbol": "star-open", "line": {"width": 2}}
_LEGEND_MARKER = {"color": "#666", "size": 11}
#: the figure's height: the plot keeps about 400 px above the legend's rows
_HEIGHT = 560
#: the table's columns a reader looks for first, left of the rest
KEY_COLUMNS = ("kernel", "variant", "latency ms", "GFLOP/s", "% of roof")


def roofline_figure(points: Sequence["RooflinePoint"], ceilings: "Ceilings", title: str = "Roofline",
                    chains: Mapping[str, str] | None = None) -> go.Figure:
    """Log-log GFLOP/s against FLOP/byte; kernels without FLOPs or latency are left out; the
    library GEMMs of ``ceilings`` are labelled reference points. ``chains``: variant label ->
    its action chain, shown on hover (default: the label)."""
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
    newest = {p.kernel: p.variant for p in shown}  # the marker that carries the kernel's name
    for i, v in enumerate(variants if any(variants) else ()):  # the legend: one entry per variant, in grey
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=short_name(v), legendgroup=v,
                                 marker={**_LEGEND_MARKER, "symbol": _SYMBOLS[i % len(_SYMBOLS)]}))
    for p in shown:
        colour = _COLOURS[kernels.index(p.kernel) % len(_COLOURS)]
        name = short_name(p.variant)
        note = p.roof_note(ceilings)  # over 100%: why (its data sits in a cache, or the peak was measured low)
        share = "" if p.over_peak(ceilings) else f"{p.percent_of_roof(ceilings):.1f}% of the {p.bound(ceilings)} roof"
        chain = hover_lines((chains or {}).get(p.variant, p.variant))
        labelled = newest[p.kernel] == p.variant
        fig.add_trace(go.Scatter(
            x=[p.intensity], y=[p.gflops], mode="markers+text" if labelled else "markers",
            text=[p.kernel] if labelled else None, textposition="top center", cliponaxis=False,
            textfont={"size": 10, "color": colour}, name=f"{p.kernel} · {name}" if p.variant else p.kernel,
            legendgroup=p.variant, showlegend=False,
            marker={"color": colour, "size": 13, "line": {"width": 1, "color": "#fff"},
                    "symbol": _SYMBOLS[variants.index(p.variant) % len(_SYMBOLS)]},
            hovertemplate=(f"<b>{p.kernel}</b> {name}<br>" + (f"{chain}<br>" if p.variant else "")
                           + "%{x:.2f} FLOP/byte<br>%{y:.2f} GFLOP/s<br>"
                           + "<br>".join(t for t in (share, note) if t) + "<extra></extra>")))
    # the libraries' GEMMs sit at one intensity, often at about the same rate: labels alternate
    # below and above their stars, the slower one's below, so two labels never share a line; to
    # the left, as the stars sit near the plot's right edge
    for i, y in enumerate(sorted(refs, key=lambda r: r.gflops)):
        fig.add_trace(go.Scatter(
            x=[y.intensity], y=[y.gflops], mode="markers+text", name=f"{y.label} (library)", legendgroup="library",
            text=[y.label], textposition=("bottom left", "top left")[i % 2], marker=_REFERENCE, cliponaxis=False,
            hovertemplate=f"<b>{y.label}</b> (library, {y.threads} threads)<br>%{{y:.1f}} GFLOP/s<extra></extra>"))
    ymin = min([p.gflops for p in shown] + [lo * ceilings.bandwidth_gbs]) / 2
    # a library, or a kernel timed when the peak was measured low, may beat the measured roof
    ytop = max([ceilings.peak_gflops] + [y.gflops for y in refs] + [p.gflops for p in shown])
    fig.update_layout(title=title, xaxis=log_axis([lo, hi], "arithmetic intensity (FLOP/byte, compulsory traffic)",
                                                  automargin=True),
                      # the roof on top, not the extended bandwidth line
                      yaxis=log_axis([ymin, ytop * 3], "GFLOP/s", range=[math.log10(ymin), math.log10(ytop * 3)],
                                     automargin=True),
                      template="plotly_white", legend=LEGEND_BELOW, height=_HEIGHT,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def roofline_table(points: Sequence["RooflinePoint"], ceilings: "Ceilings") -> list[dict[str, Any]]:
    """The points as table rows (``RooflinePoint.row``): ``KEY_COLUMNS`` first, so that they are
    in view without scrolling sideways, and each variant by its short name."""
    rows = []
    for p in points:
        row = {**p.row(ceilings), "variant": short_name(p.variant)}
        rows.append({**{k: row[k] for k in KEY_COLUMNS}, **row})
    return rows
