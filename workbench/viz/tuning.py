"""Tuning figures: best latency against measurements, every trial as a point, and the joint
stage's layout candidates with their scores.

Input is the tuner's progress lines as dicts (``metaschedule.read_progress``): ``task``,
``stage``, ``trial``, ``layout``, ``latency_ms`` (None when the candidate failed), ``error``.
Curves are drawn over the lines in the order they were written, so a run's x axis counts its
hardware measurements whatever the stage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from .axes import log_axis

__all__ = ["best_so_far", "program_so_far", "tuning_curves_figure", "progress_figure", "candidates_figure",
           "candidate_scores", "trial_table"]

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def best_so_far(rows: Sequence[Mapping]) -> list[float | None]:
    """The running minimum of ``latency_ms`` (None until the first successful measurement).

    >>> best_so_far([{"latency_ms": None}, {"latency_ms": 3.0}, {"latency_ms": 4.0}, {"latency_ms": 2.0}])
    [None, 3.0, 3.0, 2.0]
    """
    best, out = math.inf, []
    for r in rows:
        lat = r.get("latency_ms")
        if lat is not None and lat < best:
            best = lat
        out.append(None if best == math.inf else best)
    return out


def program_so_far(rows: Sequence[Mapping], tasks: Sequence[str] = ()) -> list[float | None]:
    """After each line, the sum of every task's best so far (a line's ``best_ms`` counts too: it
    covers records of earlier runs); None until each of ``tasks`` (or, with none given, each task
    seen so far) has a result.

    >>> rows = [{"task": "a", "latency_ms": 2.0}, {"task": "b", "latency_ms": None},
    ...         {"task": "b", "latency_ms": 1.0}, {"task": "a", "latency_ms": 1.5}]
    >>> program_so_far(rows)
    [2.0, None, 3.0, 2.5]
    >>> program_so_far(rows, tasks=["a", "b", "c"])
    [None, None, None, None]
    """
    best: dict[str, float | None] = {str(t): None for t in tasks}
    out: list[float | None] = []
    for r in rows:
        task = str(r.get("task"))
        seen = [v for v in (r.get("latency_ms"), r.get("best_ms"), best.get(task)) if v is not None]
        best[task] = min(seen) if seen else None
        out.append(None if any(v is None for v in best.values()) else sum(best.values()))  # type: ignore[arg-type]
    return out


def _curve(fig: go.Figure, rows: Sequence[Mapping], name: str, colour: str, points: bool) -> None:
    xs = list(range(1, len(rows) + 1))
    fig.add_trace(go.Scatter(x=xs, y=best_so_far(rows), mode="lines", name=f"{name}: best",
                             line={"color": colour, "width": 2, "shape": "hv"}, legendgroup=name))
    if points:
        ok = [(x, r) for x, r in zip(xs, rows) if r.get("latency_ms") is not None]
        fig.add_trace(go.Scatter(
            x=[x for x, _ in ok], y=[r["latency_ms"] for _, r in ok], mode="markers", name=f"{name}: trials",
            marker={"color": colour, "size": 5, "opacity": 0.45}, legendgroup=name,
            text=[f"{r.get('stage', '')} · {r.get('layout') or 'current layout'}" for _, r in ok],
            hovertemplate="measurement %{x}: %{y:.4f} ms<br>%{text}<extra></extra>"))
        bad = [x for x, r in zip(xs, rows) if r.get("latency_ms") is None]
        if bad:
            fig.add_trace(go.Scatter(x=bad, y=[None] * len(bad), mode="markers", name=f"{name}: failed",
                                     marker={"color": colour, "symbol": "x"}, legendgroup=name, visible="legendonly"))


def _axes(fig: go.Figure, title: str) -> go.Figure:
    ys = [y for trace in fig.data for y in (trace.y or ())]
    fig.update_layout(title=title, xaxis_title="hardware measurements", yaxis=log_axis(ys, "latency (ms)"),
                      template="plotly_white", legend={"orientation": "h", "y": -0.2},
                      margin={"l": 60, "r": 20, "t": 50, "b": 40})
    return fig


def tuning_curves_figure(tuners: Mapping[str, Sequence[Mapping]], title: str = "Tuning curves",
                         points: bool = True) -> go.Figure:
    """One best-so-far curve per tuner (e.g. ``metaschedule`` and ``joint``), trials as points."""
    fig = go.Figure()
    for i, (name, rows) in enumerate(tuners.items()):
        _curve(fig, rows, name, _PALETTE[i % len(_PALETTE)], points)
    return _axes(fig, title)


def progress_figure(rows: Sequence[Mapping], title: str = "Best latency per task",
                    tasks: Sequence[str] = ()) -> go.Figure:
    """A live tuning run: one curve per task, over that task's own measurements, and (with more
    than one task) the program's curve: the sum of the tasks' bests over all measurements, from
    the point where each of ``tasks`` (or each task seen) has a result."""
    per_task: dict[str, list[Mapping]] = {}
    for r in rows:
        per_task.setdefault(str(r.get("task")), []).append(r)
    fig = go.Figure()
    for i, (name, mine) in enumerate(per_task.items()):
        _curve(fig, mine, name, _PALETTE[i % len(_PALETTE)], points=True)
    if len(per_task) > 1 or len(tasks) > 1:
        fig.add_trace(go.Scatter(x=list(range(1, len(rows) + 1)), y=program_so_far(rows, tasks), mode="lines",
                                 name="program: sum of the tasks' bests",
                                 line={"color": "black", "width": 2, "dash": "dot", "shape": "hv"},
                                 hovertemplate="after %{x} measurements in all: %{y:.4f} ms<extra></extra>"))
    return _axes(fig, title)


def trial_table(rows: Sequence[Mapping]) -> list[dict]:
    """Every measurement as a table row: task, stage, trial, layout, trace, latency and error.

    >>> trial_table([{"task": "mm", "stage": "loop", "trial": 1, "trace_id": "ab", "latency_ms": None,
    ...               "error": "build failed"}])
    [{'task': 'mm', 'stage': 'loop', 'trial': 1, 'layout': 'current', 'trace': 'ab', 'latency ms': None, 'error': 'build failed'}]
    """
    return [{"task": str(r.get("task")), "stage": r.get("stage"), "trial": r.get("trial"),
             "layout": r.get("layout") or "current", "trace": r.get("trace_id"), "latency ms": r.get("latency_ms"),
             "error": r.get("error")} for r in rows]


def candidate_scores(rows: Sequence[Mapping]) -> list[dict]:
    """The joint stage's layout candidates in the order they were tried, with their score (the
    best latency a short loop tuning found on them) and measurement count."""
    out: dict[tuple[str, str], dict] = {}
    for r in rows:
        if r.get("stage") != "joint":
            continue
        key = (str(r.get("task")), str(r.get("layout") or "current"))
        c = out.setdefault(key, {"task": key[0], "layout": key[1], "score_ms": None, "measurements": 0, "errors": 0})
        c["measurements"] += 1
        lat = r.get("latency_ms")
        if lat is None:
            c["errors"] += 1
        elif c["score_ms"] is None or lat < c["score_ms"]:
            c["score_ms"] = lat
    return list(out.values())


def candidates_figure(rows: Sequence[Mapping], title: str = "Joint stage: layout candidates") -> go.Figure:
    """Bars of each layout candidate's score, in the order tried (lower is better)."""
    cands = candidate_scores(rows)
    fig = go.Figure()
    for i, task in enumerate(dict.fromkeys(c["task"] for c in cands)):
        mine = [c for c in cands if c["task"] == task and c["score_ms"] is not None]
        fig.add_trace(go.Bar(x=[c["layout"] for c in mine], y=[c["score_ms"] for c in mine], name=task,
                             marker_color=_PALETTE[i % len(_PALETTE)],
                             customdata=[c["measurements"] for c in mine],
                             hovertemplate="%{x}<br>best %{y:.4f} ms after %{customdata} measurements<extra></extra>"))
    fig.update_layout(title=title, yaxis_title="score: best latency (ms)", template="plotly_white",
                      xaxis_tickangle=-30, margin={"l": 60, "r": 20, "t": 50, "b": 120})
    return fig
