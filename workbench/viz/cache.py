"""Cache profile figures: footprint per loop level against the cache sizes, and the estimated
misses of variants side by side (legends below the plots, long names cut: the hover has them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from workbench.engine.base import words

from .axes import log_axis
from .legend import LEGEND_BELOW, short_name

if TYPE_CHECKING:
    from workbench.engine.measure.ceilings import Ceilings
    from workbench.engine.measure.footprint import Profile

__all__ = ["footprint_figure", "misses_figure"]

_CACHE_COLOURS = {"L1d": "#2ca02c", "L2": "#ff7f0e", "L3": "#d62728"}


def footprint_figure(profile: "Profile", ceilings: "Ceilings | None" = None, title: str | None = None) -> go.Figure:
    """Bytes one iteration of each loop touches, per buffer and in total, outermost loop first;
    the caches (``ceilings``' if given, else the profile's) as horizontal lines: where the total
    crosses a line, that cache stops holding it."""
    caches = ceilings.caches if ceilings is not None else profile.caches
    x = [f"{lv.depth}: {lv.loop} ({lv.extent})" for lv in profile.levels]
    fig = go.Figure()
    buffers = list(dict.fromkeys(b for lv in profile.levels for b in lv.buffers))
    for b in buffers:
        fig.add_trace(go.Scatter(x=x, y=[lv.buffers[b].bytes if b in lv.buffers else None for lv in profile.levels],
                                 mode="lines+markers", name=b, connectgaps=False))
    fig.add_trace(go.Scatter(x=x, y=[lv.bytes for lv in profile.levels], mode="lines+markers", name="total",
                             line={"color": "#000", "width": 3}))
    for cache, size in caches.items():  # traces, not shapes: each cache is named in the legend
        label = f"{cache} {words.size(size)}"
        fig.add_trace(go.Scatter(x=x, y=[size] * len(x), mode="lines", name=label,
                                 line={"color": _CACHE_COLOURS.get(cache, "#777"), "dash": "dash", "width": 1.5},
                                 hovertemplate=f"{label}<extra></extra>"))
    ys = [y for tr in fig.data for y in tr.y if y is not None]
    # long loop names go on a slanted axis with room of its own, so the plot keeps its height
    fig.update_layout(title=title or f"{profile.kernel}: footprint of one iteration per loop level",
                      yaxis=log_axis(ys, "bytes"), height=460,
                      xaxis={"title": "loop (outermost first)", "tickangle": -35, "automargin": True},
                      template="plotly_white", legend=LEGEND_BELOW, margin={"l": 60, "r": 20, "t": 50, "b": 40})
    return fig


def misses_figure(profiles: Mapping[str, "Profile"], title: str = "Estimated cache misses") -> go.Figure:
    """Per variant: estimated misses per cache, all lines and prefetch-aware (runs); the hover
    names the bound that set a bar (compulsory misses, inclusion), if one did."""
    fig = go.Figure()
    for name, prof in profiles.items():
        caches = list(prof.misses)
        bounds = [prof.misses[c].get("bounded by") or "the model's estimate" for c in caches] * 2
        fig.add_trace(go.Bar(x=[f"{c} (all lines)" for c in caches] + [f"{c} (prefetch-aware)" for c in caches],
                             y=[prof.misses[c]["misses (lines)"] for c in caches]
                             + [prof.misses[c]["misses (prefetch-aware)"] for c in caches], name=short_name(name),
                             customdata=bounds, hovertemplate="%{x}: %{y:,} misses (%{customdata})<extra>"
                             + name + "</extra>"))
    fig.update_layout(title=title, barmode="group",
                      yaxis=log_axis([y for tr in fig.data for y in tr.y], "misses per kernel call"),
                      xaxis={"automargin": True}, legend=LEGEND_BELOW,
                      template="plotly_white", margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig
