"""Tuning figures: best latency against measurements, every trial as a point, the joint stage's
layout candidates with their scores (as bars, and their parameters against latency as parallel
coordinates), and runs side by side.

Input is the tuner's progress lines as dicts (``tuning.progress.read_progress``): ``task``,
``stage``, ``trial``, ``layout``, ``latency_ms`` (None when the candidate failed), ``error``.
A line's x is its place among the lines in the order they were written (``measurement_numbers``),
so every curve of a figure, each task's and the program's, counts the run's hardware
measurements whatever the task and stage, and the trial table numbers its rows the same way.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import plotly.graph_objects as go

from workbench.engine.base.words import plural
from .axes import log_axis
from .legend import LEGEND_BELOW

if TYPE_CHECKING:
    from workbench.engine.base.step import Step

__all__ = ["best_so_far", "program_so_far", "measurement_numbers", "tuning_curves_figure", "progress_figure",
           "candidates_figure", "candidate_scores", "trial_table", "tuned_kernels", "result_text", "layout_params",
           "LayoutParameters", "layout_parameters", "layout_tasks", "layout_parameters_figure", "runs_figure"]

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


def measurement_numbers(rows: Sequence[Mapping]) -> list[int]:
    """Each line's x: its place (from 1) among all the lines. Not the line's ``trial``: that counts
    one task's measurements only, and restarts at 1 with each layout candidate of the joint stage.

    >>> measurement_numbers([{"task": "a", "trial": 1}, {"task": "b", "trial": 1}, {"task": "a", "trial": 2}])
    [1, 2, 3]
    """
    return list(range(1, len(rows) + 1))


def _curve(fig: go.Figure, rows: Sequence[Mapping], name: str, colour: str, points: bool,
           xs: Sequence[int] | None = None) -> None:
    """``rows``' best-so-far line (and points) at ``xs`` (by default 1, 2, ...: the rows are a run of their own)."""
    xs = list(xs) if xs is not None else measurement_numbers(rows)
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
                      template="plotly_white", legend=LEGEND_BELOW,
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
    """A live tuning run: one curve per task and (with more than one task) the program's curve:
    the sum of the tasks' bests, from the point where each of ``tasks`` (or each task seen) has a
    result. All on one x axis, the run's measurements (``measurement_numbers``): a task's points
    sit where they were measured in the run, not at its own trial count, so the curves line up."""
    xs = measurement_numbers(rows)
    per_task: dict[str, list[tuple[int, Mapping]]] = {}
    for x, r in zip(xs, rows):
        per_task.setdefault(str(r.get("task")), []).append((x, r))
    fig = go.Figure()
    for i, (name, mine) in enumerate(per_task.items()):
        _curve(fig, [r for _, r in mine], name, _PALETTE[i % len(_PALETTE)], points=True, xs=[x for x, _ in mine])
    if len(per_task) > 1 or len(tasks) > 1:
        fig.add_trace(go.Scatter(x=xs, y=program_so_far(rows, tasks), mode="lines",
                                 name="program: sum of the tasks' bests",
                                 line={"color": "black", "width": 2, "dash": "dot", "shape": "hv"},
                                 hovertemplate="after %{x} measurements in all: %{y:.4f} ms<extra></extra>"))
    return _axes(fig, title)


def trial_table(rows: Sequence[Mapping]) -> list[dict]:
    """Every measurement as a table row: its number in the run (the curves' x), task, stage,
    layout, trace, latency and error.

    >>> trial_table([{"task": "mm", "stage": "loop", "trial": 1, "trace_id": "ab", "latency_ms": None,
    ...               "error": "build failed"}])
    [{'measurement': 1, 'task': 'mm', 'stage': 'loop', 'layout': 'current', 'trace': 'ab', 'latency ms': None, 'error': 'build failed'}]
    """
    # the run's count, as on the curves: a line's own ``trial`` repeats (per task, per layout candidate)
    return [{"measurement": x, "task": str(r.get("task")), "stage": r.get("stage"),
             "layout": r.get("layout") or "current", "trace": r.get("trace_id"), "latency ms": r.get("latency_ms"),
             "error": r.get("error")} for x, r in zip(measurement_numbers(rows), rows)]


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


########## Layout parameters against latency; runs side by side ##########

_PARAM = re.compile(r"(\w+)=(\[[^\]]*\]|[^,]+)")
_DEFAULT = "default"


def layout_params(label: str | None) -> tuple[str, dict[str, float]]:
    """A layout candidate's preset and numeric parameters, read from the label its progress lines
    carry (``joint.Candidate.label``); a list gives one parameter per element.

    >>> layout_params("alt_tiled(tiles=[1, 16], ot=32, it=3)")
    ('alt_tiled', {'tiles[0]': 1.0, 'tiles[1]': 16.0, 'ot': 32.0, 'it': 3.0})
    >>> layout_params("default"), layout_params(None)
    (('default', {}), ('default', {}))
    """
    text = (label or _DEFAULT).strip()
    m = re.fullmatch(r"(\w+)\((.*)\)", text)
    if m is None:
        return text, {}
    params: dict[str, float] = {}
    for key, value in _PARAM.findall(m.group(2)):
        nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", value)]
        if value.startswith("["):
            params.update({f"{key}[{i}]": n for i, n in enumerate(nums)})
        elif len(nums) == 1:
            params[key] = nums[0]
    return m.group(1), params


class LayoutParameters(NamedTuple):
    """Scored layout candidates of one preset (the most tried): the parameters' names, each
    candidate's values and score, and the default layout's score (one task: ms; None if not
    scored). With ``relative``, the scores of every task over its default layout's."""

    task: str | None
    preset: str | None
    names: list[str]
    values: list[list[float]]
    latencies: list[float]
    default_ms: float | None
    relative: bool


def layout_parameters(rows: Sequence[Mapping], task: str | None = None) -> LayoutParameters:
    """``task``'s joint-stage candidates (``candidate_scores``) with a score, as parameter values;
    with no task, those of every task with a scored default layout, each score over that one's
    (tasks of one network differ in size: only ratios compare)."""
    cands = [(c["task"], c["score_ms"], *layout_params(c["layout"])) for c in candidate_scores(rows)
             if task in (None, c["task"]) and (c["score_ms"] or 0) > 0]
    defaults = {t: ms for t, ms, preset, _ in cands if preset == _DEFAULT}
    presets = Counter(preset for t, _, preset, params in cands if params and (task or t in defaults))
    top = presets.most_common(1)[0][0] if presets else None
    mine = [(ms if task else ms / defaults[t], params) for t, ms, preset, params in cands
            if params and preset == top and (task or t in defaults)]
    names = list(dict.fromkeys(k for _, params in mine for k in params))
    mine = [(ms, params) for ms, params in mine if all(k in params for k in names)]
    return LayoutParameters(task, top, names, [[params[k] for k in names] for _, params in mine],
                            [ms for ms, _ in mine], defaults.get(task) if task else None, task is None)


def layout_tasks(rows: Sequence[Mapping]) -> list[str]:
    """The tasks with a scored layout candidate that has parameters, in the order first tried."""
    return [t for t in dict.fromkeys(c["task"] for c in candidate_scores(rows))
            if layout_parameters(rows, t).values]


def _dimension(label: str, values: list[float]) -> dict:
    """A parallel axis; positive values on a log2 scale (tiles of 1 ... 64 spread evenly), ticked at each value."""
    log = all(v > 0 for v in values)
    scale = (lambda v: math.log2(v)) if log else (lambda v: v)  # noqa: E731
    ticks = sorted(set(values))
    lo, hi = scale(ticks[0]), scale(ticks[-1])
    return {"label": label, "values": [scale(v) for v in values],
            "range": [lo - 0.5, hi + 0.5] if lo == hi else [lo, hi],  # one value: mid-axis, not at an end
            "tickvals": [scale(t) for t in ticks], "ticktext": [f"{t:g}" for t in ticks]}


def layout_parameters_figure(rows: Sequence[Mapping], task: str | None = None,
                             title: str | None = None) -> go.Figure:
    """Parallel coordinates, one line per scored layout candidate (``layout_parameters``): an axis
    per layout parameter, then its score, the line coloured by that score (darker is faster)."""
    info = layout_parameters(rows, task)
    head = title or (f"{task or 'every task'}: {info.preset or 'layout'} parameters against latency"
                     + (f" (default layout: {info.default_ms:.4f} ms)" if info.default_ms is not None else ""))
    layout = {"title": head, "template": "plotly_white", "margin": {"l": 60, "r": 60, "t": 100, "b": 30}}
    if not info.values:
        return go.Figure(data=[], layout=layout)
    dims = [_dimension(n, [v[j] for v in info.values]) for j, n in enumerate(info.names)]
    # latency on a log axis with 1-2-5 ticks: one slow candidate does not flatten the others
    axis = log_axis(info.latencies)
    dims.append({"label": "latency / default layout's" if info.relative else "latency (ms)",
                 "values": [math.log10(v) for v in info.latencies], "range": axis["range"],
                 "tickvals": [math.log10(t) for t in axis["tickvals"]], "ticktext": axis["ticktext"]})
    return go.Figure(go.Parcoords(dimensions=dims, line={"color": dims[-1]["values"], "colorscale": "Blues",
                                                         "reversescale": True, "showscale": False}), layout=layout)


def runs_figure(runs: Mapping[str, Sequence[Mapping]], title: str = "Tuning runs side by side") -> go.Figure:
    """Each run's program curve (``program_so_far``: the sum of its tasks' bests, from the point
    where every task of the run has one) against its own measurements, all on one axis: the run
    whose curve lies lower got there faster."""
    fig = go.Figure()
    for i, (name, rows) in enumerate(runs.items()):
        tasks = list(dict.fromkeys(str(r.get("task")) for r in rows))  # a sum over fewer would climb as tasks come
        colour = _PALETTE[i % len(_PALETTE)]  # markers: a curve of a point or two still shows
        fig.add_trace(go.Scatter(x=measurement_numbers(rows), y=program_so_far(rows, tasks), mode="lines+markers",
                                 name=name, line={"color": colour, "width": 2, "shape": "hv"},
                                 marker={"color": colour, "size": 4},
                                 hovertemplate=f"{name}<br>after %{{x}} measurements: %{{y:.4f}} ms<extra></extra>"))
    return _axes(fig, title)


########## The result in words ##########

def _latency(step: Step) -> float | None:
    lat = step.get("latency_ms")
    return float(lat) if isinstance(lat, (int, float)) and math.isfinite(lat) else None


def _layout_label(lay: Mapping) -> str:
    """A tuned step's layout as the trial table's layout column names it: ``alt_tiled(ot=16, it=3)``."""
    params = lay.get("params") or {}
    name = str(lay.get("preset") or lay.get("primitive"))
    return name + ("(" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")" if params else "")


def tuned_kernels(steps: Sequence[Step]) -> list[tuple[str, float, str | None]]:
    """The kernels a tuning result tuned, as ``(kernel, latency ms, source)``: its ``tuned`` steps
    that carry the tuner's latency; ``source`` names the op whose result a kernel shares (an
    equal kernel, tuned once; None when the kernel was measured itself). A tuned trace re-applied
    to a kernel that lost it carries no latency, and loop or layout steps are no tuning: neither
    is listed."""
    out = []
    for s in steps:
        if s.kind == "tuned" and (lat := _latency(s)) is not None:
            twin = re.search(r"\(from (\S+)\)", str(s.get("stage") or "")) if not s.get("measurements") else None
            out.append((s.target, lat, twin.group(1) if twin else None))
    return out


def result_text(steps: Sequence[Step]) -> str:
    """What a tuning result brings to the session, in words: the kernels it tuned with their
    latency (``tuned_kernels``), then the actions applying it adds, by kernel. The joint stage adds
    more than schedules of tuned kernels: their layouts travel in the tuned step, and the kernels
    it does not tune (a pad, a pool) get a schedule of their own as loop actions.

    >>> from workbench.engine.base.step import Step
    >>> conv = Step.make("tuned", "conv", "tuned", stage="joint+loop", trace=[], latency_ms=0.6276, measurements=6,
    ...                  layouts=[{"kind": "layout", "tensor": "conv", "preset": "alt_tiled", "params": {}}])
    >>> pad = [Step.make("loop", "pad", p, block="pad") for p in ("reorder", "fuse", "parallel", "vectorize")]
    >>> print(result_text([conv, *pad]))
    1 tuned kernel: conv 0.6276 ms. Applying it adds 5 actions: conv's tuned schedule in layout alt_tiled; pad's schedule (4 loop actions).
    >>> print(result_text([Step.make("tuned", k, "tuned", stage="loop", trace=[], latency_ms=ms, measurements=2)
    ...                    for k, ms in (("pad", 0.01), ("conv", 0.5))]))
    2 tuned kernels: pad 0.0100 ms, conv 0.5000 ms. Applying it adds 2 actions, one tuned schedule per kernel.
    """
    kernels = tuned_kernels(steps)
    head = (f"{plural(len(kernels), 'tuned kernel')}: " + ", ".join(
        f"{k} {lat:.4f} ms" + (f" ({src}'s result: equal kernels are tuned once)" if src else "")
        for k, lat, src in kernels) if kernels else "no kernel tuned")
    if not steps:
        return f"{head}: the result adds nothing to the session."
    parts: dict[str, list[str]] = {}
    loops: dict[str, int] = {}
    layouts: dict[str, int] = {}
    plain = True  # every action a tuned kernel's schedule, in the layout it had
    for s in steps:
        what = parts.setdefault(s.target, [])
        if s.kind == "tuned":
            names = [_layout_label(lay) for lay in s.get("layouts") or []]
            again = _latency(s) is None
            plain &= not (names or again)
            what.append("tuned schedule" + (" in layout " + ", ".join(names) if names else "")
                        + (" (re-applied)" if again else ""))
        else:
            plain = False
            count = loops if s.kind == "loop" else layouts
            count[s.target] = count.get(s.target, 0) + 1
    if plain:
        return f"{head}. Applying it adds {plural(len(steps), 'action')}, one tuned schedule per kernel."
    for target, n in loops.items():
        parts[target].append(f"schedule ({plural(n, 'loop action')})")
    for target, n in layouts.items():
        parts[target].append(f"layout ({plural(n, 'layout action')})")
    applied = "; ".join(f"{t}'s " + " and ".join(w) for t, w in parts.items())
    return f"{head}. Applying it adds {plural(len(steps), 'action')}: {applied}."
