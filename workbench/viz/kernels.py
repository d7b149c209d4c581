"""Per-kernel latency bars: one group per kernel, one bar per measured variant, each variant
named by its number in the legend (below the plot) and by its action chain on hover."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from .legend import LEGEND_BELOW, hover_lines, short_name

__all__ = ["latency_bars_figure"]


def latency_bars_figure(timings: Mapping[str, Mapping[str, float]], title: str = "Latency per kernel",
                        spreads: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
                        chains: Mapping[str, str] | None = None) -> go.Figure:
    """``timings``: variant label -> {kernel name: median latency in ms}; ``spreads`` (optional):
    variant label -> {kernel name: (min ms, max ms, repeats)}, drawn as error bars from the min
    to the max and named in the hover; ``chains``: variant label -> its action chain (hover)."""
    fig = go.Figure()
    for variant, kernels in timings.items():
        names, medians = list(kernels), list(kernels.values())
        got = [(spreads or {}).get(variant, {}).get(k) for k in names]
        bar: dict = {}
        if all(got) and got:
            bar["error_y"] = {"type": "data", "symmetric": False, "array": [g[1] - m for g, m in zip(got, medians)],
                              "arrayminus": [m - g[0] for g, m in zip(got, medians)]}
            bar["customdata"] = [list(g) for g in got]
            hover = "%{x}: median %{y:.4f} ms (min %{customdata[0]:.4f}, max %{customdata[1]:.4f}, " \
                    "%{customdata[2]} runs)"
        else:
            hover = "%{x}: %{y:.4f} ms"
        name = short_name(variant)
        chain = hover_lines((chains or {}).get(variant, variant))
        fig.add_trace(go.Bar(x=names, y=medians, name=name, hovertemplate=f"{hover}<br>{chain}<extra>{name}</extra>",
                             **bar))
    fig.update_layout(title=title, barmode="group", yaxis_title="latency (ms, median; bars: min to max)",
                      xaxis={"automargin": True}, legend=LEGEND_BELOW,
                      template="plotly_white", margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig
