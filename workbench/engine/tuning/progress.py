"""Live progress: every measurement is appended (and flushed) as one JSON line::

    {"task": "mm", "stage": "loop", "trial": 3, "layout": null, "trace_id": "a1b2c3d4e5",
     "latency_ms": 0.0213, "error": null, "predicted": null, "best_ms": 0.0198, "time": 1795000000.1}

``trial`` counts the task's measurements, earlier runs on the same folder included;
``latency_ms`` is null and ``error`` holds TVM's message (trimmed) for a candidate that failed to
build or run (such a candidate is skipped and tuning goes on); ``predicted`` is the latency the
XGBoost model expected for the candidate before it was measured (null until the model has its
warm-up samples); ``best_ms`` is the task's best latency so far. The app and the CLI read the
file with ``read_progress`` while a tuning appends to it, and show ``summarize_progress``: each
task's best and their sum (never the minimum over all tasks, which is a pad's or a conversion's).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from ..base.words import duration, plural
from .eta import smoothed_eta
from .records import latency_ms, plain, short_error

__all__ = ["read_progress", "repair_jsonl", "ProgressWriter", "TaskBest", "ProgressSummary", "summarize_progress",
           "Pace", "pace"]


def repair_jsonl(path: Path) -> None:
    """Drop a half-written last line (a job killed while writing), so appends start clean."""
    try:
        data = path.read_bytes()
    except OSError:
        return
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[:data.rfind(b"\n") + 1])


def read_progress(path: str | Path) -> list[dict]:
    """The progress lines so far (a half-written or garbled line is skipped).

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "p.jsonl"
    >>> _ = p.write_text('{"trial": 1}\\n{"trial": 2}\\n{"tri')
    >>> read_progress(p)
    [{'trial': 1}, {'trial': 2}]
    """
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


########## Summary: best per task, and their sum ##########

@dataclass(frozen=True)
class TaskBest:
    """One task's measurements so far; ``best_ms`` is None until one succeeded."""

    task: str
    best_ms: float | None
    measurements: int
    failed: int


@dataclass(frozen=True)
class ProgressSummary:
    """Each task's best latency so far, in the order the tasks were first measured (then the
    expected tasks not measured yet), and the sum of those bests.

    The sum is the program's latency as the tuning stands (its kernels run one after another)
    only when every kernel is a task and has a result: ``complete`` says so, ``pending`` names
    the tasks without a result yet. For the joint stage the tasks are the complex ops only, and
    a task's best may come from any layout candidate (its conversions are not in it).
    """

    tasks: tuple[TaskBest, ...]

    @property
    def measurements(self) -> int:
        return sum(t.measurements for t in self.tasks)

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.tasks)

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(t.task for t in self.tasks if t.best_ms is None)

    @property
    def complete(self) -> bool:
        return bool(self.tasks) and not self.pending

    @property
    def sum_ms(self) -> float | None:
        """The sum over the tasks with a result of their best latency (None when none has one)."""
        bests = [t.best_ms for t in self.tasks if t.best_ms is not None]
        return sum(bests) if bests else None

    def headline(self) -> str:
        """One line for a status bar: the sum, over how many tasks, and which have no result.

        >>> rows = [{"task": "pad", "latency_ms": 0.01}, {"task": "conv", "latency_ms": 2.0},
        ...         {"task": "conv", "latency_ms": 1.5}]
        >>> print(summarize_progress(rows).headline())
        best per task summed: 1.5100 ms over 2 tasks (conv 1.5000, pad 0.0100)
        >>> print(summarize_progress(rows, tasks=["pad", "conv", "relu"]).headline())
        best per task summed: 1.5100 ms over 2 tasks (conv 1.5000, pad 0.0100); 1 of 3 tasks without a result yet
        >>> print(summarize_progress([]).headline())
        no result yet
        """
        if self.sum_ms is None:
            return "no result yet"
        done = [t for t in self.tasks if t.best_ms is not None]
        top = sorted(done, key=lambda t: -(t.best_ms or 0.0))[:_HEADLINE_TASKS]  # the costliest say most
        text = (f"best per task summed: {self.sum_ms:.4f} ms over {plural(len(done), 'task')} ("
                + ", ".join(f"{t.task} {t.best_ms:.4f}" for t in top) + ", ..." * (len(done) > len(top)) + ")")
        if self.pending:
            text += f"; {len(self.pending)} of {len(self.tasks)} tasks without a result yet"
        return text

    def rows(self) -> list[dict[str, Any]]:
        """One dict per task (a table): task, best ms, measurements, failed."""
        return [{"task": t.task, "best ms": t.best_ms, "measurements": t.measurements, "failed": t.failed}
                for t in self.tasks]


#: tasks a headline names (the rest are in ``rows``)
_HEADLINE_TASKS = 3


def summarize_progress(rows: Iterable[Mapping[str, Any]], tasks: Sequence[str] = ()) -> ProgressSummary:
    """Best latency per task (the minimum of its lines' ``latency_ms`` and ``best_ms``, the latter
    covering records an earlier run measured) and their sum; ``tasks`` are the tasks the tuning
    will measure, so that those without any line yet count as pending.

    >>> s = summarize_progress([{"task": "mm", "latency_ms": None, "best_ms": None},
    ...                         {"task": "mm", "latency_ms": 0.2, "best_ms": 0.2},
    ...                         {"task": "pad", "latency_ms": None, "best_ms": 0.05}])
    >>> [(t.task, t.best_ms, t.measurements, t.failed) for t in s.tasks], s.sum_ms, s.complete
    ([('mm', 0.2, 2, 1), ('pad', 0.05, 1, 1)], 0.25, True)
    """
    best: dict[str, float | None] = {str(t): None for t in tasks}
    counts: dict[str, list[int]] = {}
    for r in rows:
        task = str(r.get("task"))
        n = counts.setdefault(task, [0, 0])
        n[0] += 1
        n[1] += r.get("latency_ms") is None
        seen = [v for v in (r.get("latency_ms"), r.get("best_ms"), best.get(task)) if v is not None]
        best[task] = min(seen) if seen else None
    order = [*counts, *(t for t in best if t not in counts)]  # measured first, in the order measured
    return ProgressSummary(tuple(TaskBest(t, best[t], *counts.get(t, (0, 0))) for t in order))


########## Pace: measurements against the budget, elapsed, time left ##########

@dataclass(frozen=True)
class Pace:
    """A run's measurements so far against its budget, the seconds since it started, and the
    time left (``eta.smoothed_eta``: None while estimating)."""

    done: int
    budget: int
    elapsed_s: float
    left_s: float | None = None

    def text(self) -> str:
        """One line: measurements of the budget, elapsed time, time left.

        >>> print(Pace(32, 128, 64.0, 192.0).text())
        32 of 128 measurements · 1 min 4 s elapsed · about 3 min 12 s left
        >>> print(Pace(0, 1, 3.0).text())
        0 of 1 measurement · 3 s elapsed
        >>> print(Pace(7, 8, 30.0, 0.0).text())
        7 of 8 measurements · 30 s elapsed · finishing
        """
        text = f"{self.done} of {plural(self.budget, 'measurement')} · {duration(self.elapsed_s)} elapsed"
        if self.left_s is not None:
            text += f" · about {duration(self.left_s)} left" if self.left_s >= 1.0 else " · finishing"
        return text


def pace(rows: Iterable[Mapping[str, Any]], budget: int, started: float, now: float | None = None) -> Pace:
    """The pace of a run that started at ``started`` (seconds since the epoch) with ``budget``
    measurements: the lines written since it started count (a resumed folder holds older ones),
    and the time left is their smoothed projection (``eta``).

    >>> pace([{"time": 5.0}, {"time": 12.0}, {"time": 20.0}], 8, started=10.0, now=30.0)
    Pace(done=2, budget=8, elapsed_s=20.0, left_s=38.0)
    """
    times = [t for r in rows if (t := float(r.get("time") or 0.0)) >= started]
    now = time.time() if now is None else now
    left = smoothed_eta(times, budget).left_s(now) if len(times) < budget else None
    return Pace(min(len(times), budget), budget, max(0.0, now - started), left)


def _trace_id(trace_json: Any) -> str:
    return hashlib.sha1(json.dumps(plain(trace_json), sort_keys=True).encode()).hexdigest()[:10]


@derived_object
class ProgressWriter(PyMeasureCallback):
    """Appends one JSON line per measurement to ``path`` (none when it is None) and keeps the
    task's count, best latency and errors; MetaSchedule calls it after each batch."""

    def __init__(self, path: Path | None, task: str, stage: str, layout: str | None, done: int,
                 best: float | None, model: Any) -> None:
        self.path, self.task, self.stage, self.layout = path, task, stage, layout
        self.done, self.best, self.model = done, best, model
        self.errors: list[str] = []
        self.ok = 0

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Any, builder_results: Any,
              runner_results: Any) -> None:
        try:
            predicted = self._predicted(task_scheduler.tasks_[int(task_id)].ctx, measure_candidates)
        except Exception:  # noqa: BLE001 (a prediction is optional)
            predicted = [None] * len(measure_candidates)
        self.record(measure_candidates, builder_results, runner_results, predicted)

    def record(self, measure_candidates: Any, builder_results: Any, runner_results: Any,
               predicted: list[float | None] | None = None) -> None:
        """Count and write measurements (``apply`` for MetaSchedule's; ``seed`` for the expert's)."""
        predicted = predicted or [None] * len(measure_candidates)
        rows = []
        for cand, br, rr, pred in zip(measure_candidates, builder_results, runner_results, predicted):
            self.done += 1
            error = br.error_msg or rr.error_msg
            lat = None if error else latency_ms(rr.run_secs)
            if lat is None:
                error = short_error(error or "no run time")
                self.errors.append(error)
            else:
                self.ok += 1
                self.best = lat if self.best is None else min(self.best, lat)
            rows.append({"task": self.task, "stage": self.stage, "trial": self.done, "layout": self.layout,
                         "trace_id": _trace_id(cand.sch.trace.as_json()), "latency_ms": lat,
                         "error": error, "predicted": pred, "best_ms": self.best, "time": time.time()})
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
                f.flush()

    def _predicted(self, ctx: Any, candidates: Any) -> list[float | None]:
        """Predicted latency (ms) = the task's best measured latency / the model's normalized score."""
        from tvm.s_tir.meta_schedule.utils import shash2hex

        m = self.model
        group = m.data.get(shash2hex(ctx.mod)) if m is not None else None
        if group is None or m.booster is None or m.data_size < m.num_warmup_samples:
            return [None] * len(candidates)
        scores = m.predict(ctx, list(candidates))
        return [float(group.min_cost) * 1e3 / s if s > 0 else None for s in scores]
