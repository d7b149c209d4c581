"""Tuning views (viz/tuning.py): the best-so-far curves of the program and of each task at the
run's measurements, the trial table numbered as the curves are, the result's tuned kernels and
what applying adds; layout parameters against latency as parallel coordinates, read from the
labels the joint stage writes, and two runs side by side."""

from __future__ import annotations

import re

import pytest

from tests.viz.test_profile_figures import below
from workbench.viz.tuning import (best_so_far, candidate_scores, candidates_figure, layout_parameters,
                                  layout_parameters_figure, layout_params, layout_tasks, progress_figure, runs_figure,
                                  trial_table, tuning_curves_figure)


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


def test_best_so_far_and_curves():
    rows = [{"task": "a", "stage": "joint", "layout": "L1", "latency_ms": 5.0},
            {"task": "a", "stage": "joint", "layout": "L1", "latency_ms": None, "error": "boom"},
            {"task": "a", "stage": "joint", "layout": "L2", "latency_ms": 3.0},
            {"task": "a", "stage": "loop", "layout": "L2", "latency_ms": 4.0},
            {"task": "b", "stage": "loop", "layout": None, "latency_ms": 1.0}]
    assert best_so_far(rows) == [5.0, 5.0, 3.0, 3.0, 1.0]
    fig = progress_figure(rows)
    best = {tr.name: list(tr.y) for tr in fig.data if tr.name.endswith(": best")}
    assert best == {"a: best": [5.0, 5.0, 3.0, 3.0], "b: best": [1.0]}
    assert fig.layout.yaxis.type == "log"
    scores = candidate_scores(rows)
    assert [(c["layout"], c["score_ms"], c["measurements"], c["errors"]) for c in scores] == [
        ("L1", 5.0, 2, 1), ("L2", 3.0, 1, 0)]
    bars = candidates_figure(rows).data[0]
    assert list(bars.x) == ["L1", "L2"] and list(bars.y) == [5.0, 3.0]
    two = tuning_curves_figure({"metaschedule": rows[:2], "joint": rows[2:4]})
    assert {tr.legendgroup for tr in two.data} == {"metaschedule", "joint"}


def test_the_program_curve_sums_the_tasks_bests_once_each_has_one():
    rows = [{"task": "conv", "latency_ms": 4.0}, {"task": "pad", "latency_ms": None, "error": "boom"},
            {"task": "pad", "latency_ms": 0.5}, {"task": "conv", "latency_ms": 3.0}]
    fig = progress_figure(rows, tasks=["conv", "pad"])
    program = next(tr for tr in fig.data if tr.name.startswith("program"))
    assert list(program.y) == [None, None, 4.5, 3.5] and list(program.x) == [1, 2, 3, 4]
    assert not any(tr.name.startswith("program") for tr in progress_figure(rows[:1]).data)  # one task: no sum


def test_each_tasks_curve_sits_at_the_runs_measurements_like_the_program_curve():
    """r18_block, loop stage, budget 6: conv1's three trials, then conv2's, each counting its own
    trials from 1. On the shared axis conv2's points are measurements 4-6, where the program's
    sum starts (not 1-3, left of conv1's)."""
    rows = [{"task": "conv1", "stage": "loop", "trial": t, "latency_ms": 3.0 - t / 10} for t in (1, 2, 3)] + [
        {"task": "conv2", "stage": "loop", "trial": t, "latency_ms": 2.0 - t / 10} for t in (1, 2, 3)]
    fig = progress_figure(rows, tasks=["conv1", "conv2"])
    xs = {tr.name: list(tr.x) for tr in fig.data}
    assert xs["conv1: best"] == xs["conv1: trials"] == [1, 2, 3]
    assert xs["conv2: best"] == xs["conv2: trials"] == [4, 5, 6]
    program = next(tr for tr in fig.data if tr.name.startswith("program"))
    assert list(program.x) == [1, 2, 3, 4, 5, 6] and list(program.y)[:3] == [None] * 3
    assert list(program.y)[3:] == pytest.approx([2.7 + 1.9, 2.7 + 1.8, 2.7 + 1.7])
    bad = [{"task": "a", "latency_ms": 1.0}, {"task": "b", "latency_ms": None, "error": "boom"},
           {"task": "b", "latency_ms": 2.0}]
    failed = next(tr for tr in progress_figure(bad).data if tr.name == "b: failed")
    assert list(failed.x) == [2]


def test_the_trial_table_numbers_measurements_as_the_curves_do():
    """The joint stage: each layout candidate's short tuning counts its trials from 1, then the
    loop stage goes on from the chosen one's: the table numbers rows by the run's measurement,
    unique, and a point's x on the curves is its row's number."""
    rows = [{"task": "conv", "stage": "joint", "trial": 1, "layout": "default", "latency_ms": 0.9},
            {"task": "conv", "stage": "joint", "trial": 1, "layout": "alt_tiled(ot=16)", "latency_ms": 0.7},
            {"task": "conv", "stage": "loop", "trial": 2, "layout": "alt_tiled(ot=16)", "latency_ms": None},
            {"task": "conv", "stage": "loop", "trial": 3, "layout": "alt_tiled(ot=16)", "latency_ms": 0.6}]
    table = trial_table(rows)
    assert [r["measurement"] for r in table] == [1, 2, 3, 4] and "trial" not in table[0]
    points = next(tr for tr in progress_figure(rows).data if tr.name == "conv: trials")
    measured = {r["measurement"]: r["latency ms"] for r in table if r["latency ms"] is not None}
    assert dict(zip(points.x, points.y)) == measured


def test_the_tuning_result_lists_only_tuned_kernels_and_what_applying_adds():
    """The joint stage on r18_stem: one tuned step (conv, with its layout) and the pad kernel's
    analytic schedule as loop actions: one tuned kernel, no "nan ms"."""
    from workbench.engine.base.step import Step
    from workbench.viz.tuning import result_text, tuned_kernels

    layout = {"kind": "layout", "tensor": "conv", "preset": "alt_tiled", "params": {"ot": 16}}
    conv = Step.make("tuned", "conv", "tuned", stage="joint+loop", layouts=[layout], trace=[[], []],
                     latency_ms=0.6276, measurements=6)
    pad = [Step.make("loop", "pad", p, block="pad") for p in ("reorder", "fuse", "parallel", "vectorize")]
    text = result_text([conv, *pad])
    assert text.startswith("1 tuned kernel: conv 0.6276 ms.") and "nan" not in text
    assert "adds 5 actions: conv's tuned schedule in layout alt_tiled(ot=16); pad's schedule (4 loop actions)." in text
    twin = Step.make("tuned", "conv2", "tuned", stage="joint+loop (from conv)", trace=[[], []], latency_ms=0.6276,
                     measurements=0)
    again = Step.make("tuned", "conv3", "tuned", stage="joint+loop (re-applied)", trace=[[], []], measurements=0)
    assert tuned_kernels([conv, *pad, twin, again]) == [("conv", 0.6276, None), ("conv2", 0.6276, "conv")]
    text = result_text([conv, twin, again])
    assert text.startswith("2 tuned kernels: conv 0.6276 ms, conv2 0.6276 ms (conv's result") and "nan" not in text
    assert "conv3's tuned schedule (re-applied)" in text
    assert result_text(pad).startswith("no kernel tuned. Applying it adds 4 actions")
