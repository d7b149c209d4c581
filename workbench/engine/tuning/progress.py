"""Live progress: every measurement is appended (and flushed) as one JSON line::

    {"task": "mm", "stage": "loop", "trial": 3, "layout": null, "trace_id": "a1b2c3d4e5",
     "latency_ms": 0.0213, "error": null, "predicted": null, "best_ms": 0.0198, "time": 1795000000.1}

``trial`` counts the task's measurements, earlier runs on the same folder included;
``latency_ms`` is null and ``error`` holds TVM's message (trimmed) for a candidate that failed to
build or run (such a candidate is skipped and tuning goes on); ``predicted`` is the latency the
XGBoost model expected for the candidate before it was measured (null until the model has its
warm-up samples); ``best_ms`` is the task's best latency so far. The app and the CLI read the
file with ``read_progress`` while a tuning appends to it.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from .records import latency_ms, plain, short_error

__all__ = ["read_progress", "repair_jsonl", "ProgressWriter"]


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
