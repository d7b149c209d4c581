"""The network in time as figures: the kernels' timeline by op type, the time by op type, and
the network beside the frameworks."""

from __future__ import annotations

import pytest

from workbench.engine.session.network_time import CONVERSION, Contender, KernelSpan, NetworkTime
from workbench.engine.base.timing import Stats
from workbench.viz.timeline import CONVERSION as RED
from workbench.viz.timeline import LANE_PX, by_type_figure, contenders_figure, timeline_figure


def _network() -> NetworkTime:
    spans, start = [], 0.0
    for name, op_type, ms in [("conv1", "C2D", 2.0), ("convert_relu1", CONVERSION, 0.5), ("conv2", "C2D", 3.0),
                              ("pool", "max_pool2d", 0.25), ("dense", "GMM", 1.0)]:
        spans.append(KernelSpan(name, op_type, () if op_type == CONVERSION else (name,), start,
                                Stats.of([ms * 0.9, ms, ms * 1.2])))
        start += ms
    return NetworkTime("tiny", tuple(spans), 3, (
        Contender("ours (compiled network)", Stats.of([6.5, 7.0, 7.5]), 1e-7),
        Contender("PyTorch eager", Stats.of([9.0, 10.0, 12.0]), 2e-6),
        Contender("ONNX Runtime", None, note="ImportError: no onnxruntime")))


def test_the_timeline_puts_each_kernel_at_its_start_in_its_op_types_lane():
    fig = timeline_figure(_network())
    lanes = {tr.name: tr for tr in fig.data}
    assert list(lanes) == ["C2D", "GMM", "conversion", "max_pool2d"]  # slowest op type first
    conv = lanes["C2D"]
    assert list(conv.base) == [0.0, 2.5] and list(conv.x) == [2.0, 3.0] and conv.orientation == "h"
    assert set(conv.y) == {"C2D"} and [c[0] for c in conv.customdata] == ["conv1", "conv2"]
    assert lanes["conversion"].marker.color == RED and lanes["C2D"].marker.color != RED
    assert fig.layout.height == pytest.approx(110 + 4 * LANE_PX)
    assert fig.layout.yaxis.autorange == "reversed" and "ms" in fig.layout.xaxis.title.text
    assert fig.layout.barmode == "overlay"  # a lane's bars take its whole height, not a slot per op type


def test_time_by_op_type_sums_the_kernels_with_their_share():
    fig = by_type_figure(_network())
    (bars,) = fig.data
    assert list(bars.y) == ["C2D", "GMM", "conversion", "max_pool2d"]
    assert list(bars.x) == pytest.approx([5.0, 1.0, 0.5, 0.25])
    assert list(bars.text) == ["74%", "15%", "7%", "4%"] and list(bars.customdata) == [2, 1, 1, 1]


def test_the_contenders_that_ran_are_bars_from_min_to_max_ours_first():
    fig = contenders_figure(_network())
    (bars,) = fig.data
    assert list(bars.y) == ["ours (compiled network)", "PyTorch eager"]  # ONNX Runtime could not run
    assert list(bars.x) == [7.0, 10.0]
    assert list(bars.error_x.array) == pytest.approx([0.5, 2.0]) and list(bars.error_x.arrayminus) == pytest.approx([0.5, 1.0])


def test_nothing_timed_is_an_empty_figure():
    empty = NetworkTime("none", (), 0, (Contender("ours (compiled network)", None),))
    assert timeline_figure(empty).data == () and by_type_figure(empty).data == ()
    assert contenders_figure(empty).data == ()
