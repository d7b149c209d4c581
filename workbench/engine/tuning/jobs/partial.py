"""The best so far of a session tuning that ended before its result (stopped, or failed midway).

A loop-only run keeps every measurement in its MetaSchedule database (``work/loop``): each
kernel measured so far takes its best trace, checked as a finished run's are
(``apply.first_correct``), and the kernels left take what a finished run gives them
(``settle.schedule_the_rest``). A joint run is not applied in part: it chooses the layouts op by
op, each on the ones chosen before, and only its end assembles them into one network; a part
of it says why (``PartialResult.reason``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...session.session import Session, State, replay
from ...base.step import Step
from ...base.words import plural
from ..apply import first_correct
from ..records import TuneResult, TuneTask
from ..settle import schedule_the_rest

__all__ = ["KernelBest", "PartialResult", "loop_results_applied", "partial_reason", "partial_result"]


@dataclass(frozen=True)
class KernelBest:
    """A kernel's best measurement so far, and whether its trace was applied (``kept``: False
    when it computed a wrong result, and the kernel kept its schedule)."""

    kernel: str
    best_ms: float
    measurements: int
    kept: bool = True


@dataclass(frozen=True)
class PartialResult:
    """The tuned state of a run's best so far (None when nothing applies, ``reason`` says why)."""

    state: State | None
    kernels: tuple[KernelBest, ...] = ()
    reason: str = ""

    def text(self) -> str:
        """One line: which kernels take their best trace, which do not.

        >>> PartialResult(None, (), "nothing was measured").text()
        'nothing was measured'
        >>> r = PartialResult(None, (KernelBest("conv", 0.728, 26), KernelBest("pad", 0.01, 3, kept=False)))
        >>> print(r.text().replace("; ", ";\\n"))
        1 kernel takes its best trace so far: conv 0.7280 ms (26 measurements);
        not pad (its best computes a wrong result)
        """
        if self.reason:
            return self.reason
        kept = [k for k in self.kernels if k.kept]
        text = (f"{plural(len(kept), 'kernel')} {'takes its' if len(kept) == 1 else 'take their'} best trace so far: "
                + ", ".join(f"{k.kernel} {k.best_ms:.4f} ms ({plural(k.measurements, 'measurement')})" for k in kept))
        if wrong := [k.kernel for k in self.kernels if not k.kept]:
            text += f"; not {', '.join(wrong)} (its best computes a wrong result)"
        return text


def loop_results_applied(state: State, results: dict[str, TuneResult], stage: str = "loop") -> State:
    """``state`` with each kernel's result that has a measurement pushed as a ``tuned`` step,
    those that compute a wrong result left out (``first_correct``)."""
    for name, r in results.items():
        if r.best_ms is not None:
            step = Step.make("tuned", name, "tuned", stage=stage, trace=r.trace, latency_ms=r.best_ms,
                             measurements=r.measurements)
            state = first_correct(state, name, {"tuned": lambda s, step=step: s.push(step)})
    return state


def partial_reason(stage: str, rows: list[dict]) -> str:
    """Why the best so far of a ``stage`` run with progress lines ``rows`` cannot be applied
    ("" when it can be tried): read from the lines alone, so a page can say it at once.

    >>> partial_reason("loop", [{"latency_ms": None}]), partial_reason("loop", [{"latency_ms": 0.7}])
    ('no kernel has a successful measurement yet: there is no best to apply', '')
    """
    if stage != "loop":
        return (f"a joint run that ended before its result cannot be applied in part: it chooses the layouts op by "
                f"op, each on the ones chosen before, and assembles the network only at its end. Its "
                f"{plural(len(rows), 'measurement')} stay in the job's folder: start it again on the same session "
                f"to resume from them, or run the loop-only stage, whose best so far applies when stopped")
    if not any(r.get("latency_ms") is not None for r in rows):
        return _NOTHING
    return ""


_NOTHING = "no kernel has a successful measurement yet: there is no best to apply"


def partial_result(session: Session, stage: str, work_dir: Path, rows: list[dict]) -> PartialResult:
    """The best so far of a ``stage`` tuning of ``session`` whose databases are under
    ``work_dir`` (a job's ``work``) and whose progress lines are ``rows``."""
    if why := partial_reason(stage, rows):
        return PartialResult(None, reason=why)
    db_dir = Path(work_dir) / "loop"
    if not (db_dir / "database_tuning_record.json").is_file():
        return PartialResult(None, reason=f"the run's database is missing from {db_dir}: there is no best to apply")
    from ..database import open_database, task_result  # TVM's MetaSchedule: only once there is a database

    start = replay(session)
    prog = start.program
    db = open_database(db_dir)
    results = {k.name: task_result(db, TuneTask(k.name, prog.funcs[k.name], max(prog.flops.get(k.name, 0), 1)))
               for k in prog.plan.kernels}
    measured = {k: r for k, r in results.items() if r.best_ms is not None}
    if not measured:
        return PartialResult(None, reason=_NOTHING)
    state = loop_results_applied(start, measured)
    pushed = {s.target for s in state.session.steps[len(start.session.steps):] if s.kind == "tuned"}
    kernels = tuple(KernelBest(k, r.best_ms, r.measurements, k in pushed) for k, r in measured.items())
    if not any(k.kept for k in kernels):
        return PartialResult(None, kernels, "every kernel's best so far computes a wrong result: nothing to apply")
    return PartialResult(schedule_the_rest(state), kernels)
