"""Tuning views (viz/tuning.py): layout parameters against latency as parallel coordinates, read
from the labels the joint stage writes, and two runs side by side."""

from __future__ import annotations

import pytest

from tests.viz.test_profile_figures import below
from workbench.viz.tuning import (layout_parameters, layout_parameters_figure, layout_params, layout_tasks,
                                  runs_figure)


def _row(task: str, layout: str, ms: float | None, stage: str = "joint") -> dict:
    return {"task": task, "stage": stage, "trial": 1, "layout": layout, "latency_ms": ms}


#: a joint run on two convs: each scores its default layout and some alt_tiled candidates
ROWS = [_row("conv1", "default", 2.0), _row("conv1", "alt_tiled(tiles=[1, 16], ot=32, it=3)", 1.0),
        _row("conv1", "alt_tiled(tiles=[1, 16], ot=32, it=3)", 0.8),  # its best is its score
        _row("conv1", "alt_tiled(tiles=[4, 14], ot=16, it=4)", 4.0),
        _row("conv1", "alt_tiled(tiles=[2, 4], ot=64, it=8)", None),  # failed: no line
        _row("conv2", "default", 10.0), _row("conv2", "alt_tiled(tiles=[2, 4], ot=64, it=8)", 5.0),
        _row("conv1", "alt_tiled(tiles=[1, 16], ot=32, it=3)", 0.5, stage="loop")]  # loop stage: no score


def test_layout_params_read_the_labels_the_joint_stage_writes():
    from workbench.engine.tuning.joint import Candidate

    cand = Candidate("alt_tiled", (("tiles", (2, 14)), ("ot", 16), ("it", 4)))
    assert layout_params(cand.label) == ("alt_tiled", {"tiles[0]": 2.0, "tiles[1]": 14.0, "ot": 16.0, "it": 4.0})
    assert layout_params(Candidate(None).label) == ("default", {})
    assert layout_params(Candidate("nkn", (("m", 1), ("n", 8))).label) == ("nkn", {"m": 1.0, "n": 8.0})


def test_parallel_coordinates_have_an_axis_per_layout_parameter_then_latency():
    fig = layout_parameters_figure(ROWS, "conv1")
    (par,) = fig.data
    assert par.type == "parcoords"
    assert [d.label for d in par.dimensions] == ["tiles[0]", "tiles[1]", "ot", "it", "latency (ms)"]
    tiles0, _, ot, _, latency = par.dimensions
    assert [2 ** v for v in tiles0.values] == pytest.approx([1, 4]) and list(tiles0.ticktext) == ["1", "4"]
    assert [2 ** v for v in ot.values] == pytest.approx([32, 16])  # tiles and channels on a log2 scale
    assert [10 ** v for v in latency.values] == pytest.approx([0.8, 4.0])  # each candidate's best, joint stage only
    assert list(par.line.color) == list(latency.values) and "default layout: 2.0000 ms" in fig.layout.title.text


def test_every_task_at_once_compares_scores_over_each_tasks_default_layout():
    info = layout_parameters(ROWS)
    assert info.relative and info.names == ["tiles[0]", "tiles[1]", "ot", "it"]
    assert info.values == [[1, 16, 32, 3], [4, 14, 16, 4], [2, 4, 64, 8]]
    assert info.latencies == pytest.approx([0.4, 2.0, 0.5])  # 0.8 / 2, 4 / 2, 5 / 10
    (par,) = layout_parameters_figure(ROWS).data
    assert par.dimensions[-1].label == "latency / default layout's"
    assert layout_tasks(ROWS) == ["conv1", "conv2"]


def test_a_run_without_layout_candidates_draws_an_empty_figure():
    loop_only = [_row("conv", None, 1.0, stage="loop")]
    assert layout_tasks(loop_only) == [] and layout_parameters_figure(loop_only, "conv").data == ()


def test_two_runs_side_by_side_share_the_measurement_axis():
    """Each run's curve is the sum of its tasks' bests from the point where every task of the
    run has one: it never climbs as a task comes in (a network's joint stage meets its convs one
    by one)."""
    a = [{"task": "conv", "latency_ms": 3.0}, {"task": "pad", "latency_ms": 0.5}, {"task": "conv", "latency_ms": 2.0},
         {"task": "relu", "latency_ms": 0.25}, {"task": "conv", "latency_ms": 1.5}]
    b = [{"task": "conv", "latency_ms": 2.5}, {"task": "pad", "latency_ms": 0.4}, {"task": "pad", "latency_ms": None}]
    fig = runs_figure({"joint · 10:02": a, "loop · 10:30": b})
    assert [t.name for t in fig.data] == ["joint · 10:02", "loop · 10:30"]
    assert list(fig.data[0].x) == [1, 2, 3, 4, 5] and list(fig.data[0].y) == [None, None, None, 2.75, 2.25]
    assert list(fig.data[1].y) == [None, 2.9, 2.9] and fig.data[0].line.color != fig.data[1].line.color
    assert below(fig) and fig.layout.yaxis.type == "log"
    assert 10 ** fig.layout.yaxis.range[0] < 2.25 and 10 ** fig.layout.yaxis.range[1] > 2.9
