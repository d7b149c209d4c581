"""Per-kernel latency bars: one group per kernel, one bar per measured variant."""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

__all__ = ["latency_bars_figure"]


def latency_bars_figure(timings: Mapping[str, Mapping[str, float]], title: str = "Latency per kernel") -> go.Figure:
    """``timings``: variant label -> {kernel name: latency in ms}."""
    fig = go.Figure()
    for variant, kernels in timings.items():
        fig.add_trace(go.Bar(x=list(kernels), y=list(kernels.values()), name=variant,
                             hovertemplate="%{x}: %{y:.4f} ms<extra>" + variant + "</extra>"))
    fig.update_layout(title=title, barmode="group", yaxis_title="latency (ms)", template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig
