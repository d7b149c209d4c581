"""A tuning result applied to a tab's session, recorded in the job's folder: what changed
(each kernel's latency before and after) and the session as it was before, with its redo stack
(``workspace``), so the Tuning page shows the result as applied and can undo it, after a reload
too. ``applied.json`` holds the record, ``before/`` the session; a new Apply replaces both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...base.errors import SessionError
from ...base.files import write_atomic
from ...session.session import Session, State
from ...base.step import Step
from ...base.words import plural
from ...session.workspace import load_workspace, new_workspace_id, save_workspace
from .baselines import BaselinesReport

__all__ = ["KernelChange", "Applied", "kernel_changes", "record_applied", "load_applied", "before_state"]


@dataclass(frozen=True)
class KernelChange:
    """A kernel the result tuned: its latency in the session before (None: not timed) and after."""

    kernel: str
    before_ms: float | None
    after_ms: float | None

    def text(self) -> str:
        """
        >>> KernelChange("conv", 0.912, 0.6276).text(), KernelChange("conv", None, 0.6276).text()
        ('conv 0.9120 -> 0.6276 ms (1.45x)', 'conv 0.6276 ms (before: not timed)')
        """
        if self.after_ms is None:
            return f"{self.kernel} (not timed)"
        if self.before_ms is None:
            return f"{self.kernel} {self.after_ms:.4f} ms (before: not timed)"
        return f"{self.kernel} {self.before_ms:.4f} -> {self.after_ms:.4f} ms ({self.before_ms / self.after_ms:.2f}x)"


@dataclass(frozen=True)
class Applied:
    """A result applied: the session revisions before and after, the kernels it tuned, whether
    it was a stopped run's best so far (``partial``), and the id of the saved session before."""

    before_id: str
    before_key: str
    after_key: str
    kernels: tuple[KernelChange, ...]
    actions: int
    actions_before: int = 0
    partial: bool = False

    def text(self) -> str:
        """
        >>> print(Applied("0" * 16, "a", "b", (KernelChange("conv", 0.912, 0.6276),), 5, 1).text())
        Applied: 1 kernel tuned, conv 0.9120 -> 0.6276 ms (1.45x); the session has 5 actions (1 before).
        """
        what = "The best so far applied" if self.partial else "Applied"
        return (f"{what}: {plural(len(self.kernels), 'kernel')} tuned, " + ", ".join(k.text() for k in self.kernels)
                + f"; the session has {plural(self.actions, 'action')} ({self.actions_before} before).")

    def to_json(self) -> dict:
        return {"before_id": self.before_id, "before_key": self.before_key, "after_key": self.after_key,
                "kernels": [[k.kernel, k.before_ms, k.after_ms] for k in self.kernels], "actions": self.actions,
                "actions_before": self.actions_before, "partial": self.partial}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Applied:
        return Applied(str(d["before_id"]), str(d["before_key"]), str(d["after_key"]),
                       tuple(KernelChange(str(k), b, a) for k, b, a in d["kernels"]), int(d["actions"]),
                       int(d.get("actions_before", 0)), bool(d.get("partial", False)))


def kernel_changes(added: Sequence[Step], report: BaselinesReport | None, before_is_start: bool) -> list[KernelChange]:
    """The kernels the ``added`` steps tune, each after as timed beside its baselines (else the
    tuner's figure) and before as its starting schedule timed then (only when the session before
    is the one the run started from: ``before_is_start``).

    >>> from workbench.engine.base.timing import Stats
    >>> from workbench.engine.tuning.jobs.baselines import KernelBaselines
    >>> conv = Step.make("tuned", "conv", "tuned", trace=[], latency_ms=0.7)
    >>> timed = BaselinesReport((KernelBaselines("conv", Stats(0.6, 0.6, 0.6, 3), {"start": Stats(0.9, 0.9, 0.9, 3)}),))
    >>> kernel_changes([conv], timed, True)
    [KernelChange(kernel='conv', before_ms=0.9, after_ms=0.6)]
    >>> kernel_changes([conv], None, True)  # not timed: the tuner's figure, nothing before
    [KernelChange(kernel='conv', before_ms=None, after_ms=0.7)]
    """
    timed = {k.kernel: k for k in (report.kernels if report else ())}
    out = []
    for step in added:
        if step.kind != "tuned" or not step.get("latency_ms"):  # a twin re-applied carries no figure of its own
            continue
        k = timed.get(step.target)
        start = k.baselines.get("start") if k and before_is_start else None
        out.append(KernelChange(step.target, start.median_ms if start else None,
                                k.tuned.median_ms if k else float(step.get("latency_ms"))))
    return out


def record_applied(job_dir: Path, before: Session, after: Session, kernels: Sequence[KernelChange],
                   partial: bool = False) -> Applied:
    """Record in ``job_dir`` that ``after`` replaced ``before`` (saved with its redo stack)."""
    wid = new_workspace_id()
    save_workspace(Path(job_dir) / "before", wid, before, {})
    applied = Applied(wid, before.key(), after.key(), tuple(kernels), len(after.steps), len(before.steps), partial)
    write_atomic(Path(job_dir) / "applied.json", json.dumps(applied.to_json()))
    return applied


def load_applied(job_dir: Path) -> Applied | None:
    """The last result applied from ``job_dir`` (None when none was, or the record is unreadable)."""
    try:
        return Applied.from_json(json.loads((Path(job_dir) / "applied.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def before_state(job_dir: Path, applied: Applied) -> State:
    """The session as it was before ``applied``, replayed, with its redo stack."""
    ws = load_workspace(Path(job_dir) / "before", applied.before_id)
    if ws is None or ws.state.session.key() != applied.before_key:
        raise SessionError("the session from before the result was applied is no longer in the job's folder: "
                           "undo its actions in the sidebar instead")
    return ws.state
