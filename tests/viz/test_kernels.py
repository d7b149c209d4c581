"""The kernels' latency bars (``viz.kernels``): variants grouped by kernel, each kernel's min to max."""

from __future__ import annotations

import pytest

from workbench.viz.kernels import latency_bars_figure


def test_latency_bars_group_variants_by_kernel():
    fig = latency_bars_figure({"v1": {"pad": 1.0, "conv": 9.0}, "v2": {"pad": 1.5, "conv": 4.0}})
    assert [tr.name for tr in fig.data] == ["v1", "v2"]
    assert list(fig.data[1].y) == [1.5, 4.0] and fig.layout.barmode == "group"
    assert fig.data[0].error_y.array is None  # no spread given: no error bars


def test_latency_bars_draw_each_kernels_min_to_max():
    fig = latency_bars_figure({"v1": {"pad": 1.0, "conv": 9.0}},
                              spreads={"v1": {"pad": [0.9, 1.2, 5], "conv": [8.5, 9.1, 5]}})
    err = fig.data[0].error_y
    assert list(err.array) == pytest.approx([0.2, 0.1]) and list(err.arrayminus) == pytest.approx([0.1, 0.5])
    assert "min %{customdata[0]" in fig.data[0].hovertemplate and fig.data[0].customdata[1][2] == 5
