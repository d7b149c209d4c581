"""The whole network in time (``network_time.NetworkTime``, duck-typed): its kernels as a
timeline, one lane per op type, the time by op type, and the network beside the frameworks
that run the same model.

The timeline puts the kernels back to back in the order the network calls them, each as long
as its median in the network; stand-alone conversions are red, as on the graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from .drawn import KIND_COLOURS

if TYPE_CHECKING:  # engine types, for readers only
    from workbench.engine.session.network_time import NetworkTime

__all__ = ["LANE_PX", "timeline_figure", "by_type_figure", "contenders_figure"]

#: pixels per lane (one op type, or one contender) of a bar chart
LANE_PX = 28
#: above and below the lanes: the title, the axis and its title
FRAME_PX = 110
#: compute op types take these colours in turn (conversions keep the graph's red)
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f", "#e377c2", "#ff7f0e")
CONVERSION = KIND_COLOURS["conversion"]


def _layout(title: str, lanes: int, xtitle: str) -> dict[str, Any]:
    return {"title": title, "template": "plotly_white", "height": FRAME_PX + LANE_PX * max(lanes, 1),
            "margin": {"l": 10, "r": 20, "t": 40, "b": 50}, "xaxis": {"title": xtitle, "rangemode": "tozero"},
            "yaxis": {"automargin": True, "autorange": "reversed"}, "showlegend": False, "bargap": 0.25}


def _colours(types: list[str]) -> dict[str, str]:
    compute = [t for t in types if t != "conversion"]
    return {t: CONVERSION if t == "conversion" else PALETTE[compute.index(t) % len(PALETTE)] for t in types}


def timeline_figure(t: "NetworkTime") -> go.Figure:
    """One bar per kernel from its start to its end (ms), in a lane per op type, the slowest
    type on top; the hover names the kernel, its ops and its spread."""
    types = [r["op_type"] for r in t.by_type()]
    fig = go.Figure(layout=_layout("Kernels in the network, in call order", len(types),
                                   "ms from the network's start (kernels back to back, medians)") | {"barmode": "overlay"})
    colours = _colours(types)
    for op_type in types:
        spans = [k for k in t.kernels if k.op_type == op_type]
        fig.add_trace(go.Bar(
            y=[op_type] * len(spans), x=[k.ms for k in spans], base=[k.start_ms for k in spans], orientation="h",
            name=op_type, marker={"color": colours[op_type]},
            customdata=[[k.kernel, ", ".join(k.ops) or "(conversion)", k.stats.min_ms, k.stats.max_ms] for k in spans],
            hovertemplate="<b>%{customdata[0]}</b>: %{x:.4f} ms (min %{customdata[2]:.4f}, max %{customdata[3]:.4f})"
                          "<br>starts at %{base:.3f} ms<br>ops: %{customdata[1]}<extra>%{y}</extra>"))
    return fig


def by_type_figure(t: "NetworkTime") -> go.Figure:
    """The kernels' time summed per op type, slowest first, with its share of the kernels' sum."""
    rows = t.by_type()
    fig = go.Figure(layout=_layout("Time by op type", len(rows), "ms per run (sum of the kernels' medians)"))
    if not rows:
        return fig
    colours = _colours([r["op_type"] for r in rows])
    fig.add_trace(go.Bar(y=[r["op_type"] for r in rows], x=[r["ms"] for r in rows], orientation="h",
                         marker={"color": [colours[r["op_type"]] for r in rows]},
                         text=[f"{r['share']:.0%}" for r in rows], textposition="auto",
                         customdata=[r["kernels"] for r in rows],
                         hovertemplate="%{y}: %{x:.3f} ms in %{customdata} kernel(s)<extra></extra>"))
    return fig


def contenders_figure(t: "NetworkTime") -> go.Figure:
    """Each contender's latency (median, bars from min to max), ours first; those that could
    not run are left out (the page says why)."""
    ran = [c for c in t.contenders if c.stats is not None]
    fig = go.Figure(layout=_layout("The network beside the frameworks", len(ran), "latency per run (ms, median)"))
    if not ran:
        return fig
    stats = [c.stats for c in ran]
    fig.add_trace(go.Bar(
        y=[c.name for c in ran], x=[s.median_ms for s in stats], orientation="h",
        marker={"color": [PALETTE[0]] + [PALETTE[-3]] * (len(ran) - 1)},
        error_x={"type": "data", "symmetric": False, "array": [s.max_ms - s.median_ms for s in stats],
                 "arrayminus": [s.median_ms - s.min_ms for s in stats]},
        text=[f"{s.median_ms:.3f} ms" for s in stats], textposition="inside", insidetextanchor="start",
        hovertemplate="%{y}: %{x:.4f} ms<extra></extra>"))
    return fig
