"""Log axes (``viz.axes``) with readable ticks."""

from __future__ import annotations

from workbench.viz.axes import log_axis
from workbench.viz.tuning import progress_figure


def test_log_axes_carry_readable_ticks():
    rows = [{"task": "a", "latency_ms": v} for v in (0.9, 0.35, 0.21, 0.2)]
    axis = progress_figure(rows).layout.yaxis
    # the axis runs from the 1-2-5 value below the best (0.2) to the one above the first (0.9)
    assert axis.type == "log" and list(axis.ticktext) == ["0.1", "0.2", "0.5", "1"]
    assert list(axis.tickvals) == [0.1, 0.2, 0.5, 1.0] and list(axis.range) == [-1.0, 0.0]
    wide = log_axis([0.004, 37.0])
    assert wide["tickvals"][0] <= 0.004 and wide["tickvals"][-1] >= 37.0  # decades, one beyond each end
    assert log_axis([None, 0.0])["type"] == "log" and "tickvals" not in log_axis([None, 0.0])
