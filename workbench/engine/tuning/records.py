"""What a tuning takes and gives: ``TuneTask`` (a kernel to tune) and ``TuneResult`` (its best
record), with the helpers that read TVM's records and messages."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import tvm

from ..base.errors import TuneError

__all__ = ["TuneTask", "TuneResult", "plain", "latency_ms", "short_error", "renamed_trace"]

_FAILED_SECS = 1e9  # MetaSchedule records a failed candidate with run_secs = [1e10]


@dataclass(frozen=True)
class TuneTask:
    """A kernel to tune: a valid identifier, its PrimFunc and its FLOP count; ``seeds``: traces
    (JSON) measured first, beside the expert schedule, where they apply to ``func``."""

    name: str
    func: tvm.tirx.PrimFunc
    flops: int
    seeds: tuple[Any, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise TuneError(f"a task name must be an identifier, got {self.name!r}")
        if not isinstance(self.func, tvm.tirx.PrimFunc):
            raise TuneError(f"task {self.name}: func must be a PrimFunc, got {type(self.func).__name__}")


@dataclass(frozen=True)
class TuneResult:
    """A task's best record after tuning (``best_ms`` and ``trace`` are None when nothing ran).

    ``trace`` is the best schedule's trace as plain JSON; ``scheduled(func)`` re-applies it to
    the task's PrimFunc. ``measurements`` counts every record of the task in the database
    (failed ones, and those of earlier runs, included); ``failed`` counts the failed ones."""

    task: str
    best_ms: float | None
    trace: Any
    measurements: int
    failed: int = 0
    flops: int = 0

    @property
    def gflops(self) -> float | None:
        return self.flops / self.best_ms / 1e6 if self.best_ms and self.flops else None

    def scheduled(self, func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
        """``func`` with the best trace applied: the tuned kernel, ready for ``tvm.compile``."""
        if self.trace is None:
            raise TuneError(f"task {self.task} has no successful measurement to apply")
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
        try:
            tvm.s_tir.schedule.Trace.apply_json_to_schedule(self.trace, sch)
        except Exception as e:  # a trace from another kernel
            raise TuneError(f"the trace of task {self.task} does not apply to this kernel: {short_error(e)}") from None
        return sch.mod["main"]

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> TuneResult:
        return TuneResult(d["task"], d.get("best_ms"), d.get("trace"), int(d.get("measurements", 0)),
                          int(d.get("failed", 0)), int(d.get("flops", 0)))


def plain(obj: Any) -> Any:
    """A trace's JSON with TVM scalars and containers turned into plain Python (for files)."""
    if isinstance(obj, (str, bool, int, float)) or obj is None:
        return obj
    if hasattr(obj, "value") and not isinstance(obj, (list, dict)):
        return obj.value
    if isinstance(obj, dict) or hasattr(obj, "items"):
        return {str(k): plain(v) for k, v in obj.items()}
    return [plain(x) for x in obj]


def latency_ms(run_secs: Any) -> float | None:
    """A record's median latency in ms (a repeat that another process disturbed does not move
    it), or None for a failed candidate.

    >>> latency_ms([0.001, 0.003]), latency_ms([0.001, 0.002, 0.009]), latency_ms([1e10]), latency_ms(None)
    (2.0, 2.0, None, None)
    """
    secs = [float(x) for x in run_secs or []]
    if not secs or any(s >= _FAILED_SECS for s in secs):
        return None
    return statistics.median(secs) * 1e3


def short_error(msg: Any, limit: int = 300) -> str:
    """TVM's message, trimmed: its first line and its last line naming an error.

    >>> short_error("LocalBuilder: An exception occurred\\nTraceback (most recent call last):\\n  File x\\nValueError: bad")
    'LocalBuilder: An exception occurred: ValueError: bad'
    """
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    if not lines:
        return "failed"
    last = next((ln for ln in reversed(lines[1:]) if "Error" in ln or "error" in ln or "Timeout" in ln), None)
    text = lines[0] if last is None else f"{lines[0].rstrip(':')}: {last}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def renamed_trace(trace: Any, names: Mapping[str, str]) -> Any:
    """``trace`` (JSON lists) with the block names it finds its blocks by replaced: a string equal
    to a key of ``names``, or one a schedule derived from it (``conv1_local`` from ``conv1``).

    >>> renamed_trace([[["GetSBlock", [], ["conv1", "main"]], ["GetSBlock", [], ["conv1_local", "main"]]], []],
    ...               {"conv1": "conv2", "conv10": "conv11"})
    [[['GetSBlock', [], ['conv2', 'main']], ['GetSBlock', [], ['conv2_local', 'main']]], []]
    """
    if isinstance(trace, str):
        if trace in names:
            return names[trace]
        base = max((k for k in names if trace.startswith(k + "_")), key=len, default=None)
        return names[base] + trace[len(base):] if base is not None else trace
    if isinstance(trace, (list, tuple)):
        return [renamed_trace(t, names) for t in trace]
    if isinstance(trace, dict):
        return {k: renamed_trace(v, names) for k, v in trace.items()}
    return trace
