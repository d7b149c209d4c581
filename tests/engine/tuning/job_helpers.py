"""Session tuning job folders as a worker leaves them, made without tuning: the spec, progress
lines, the MetaSchedule database of a loop-only run, the result, a stop. ``Job.attach`` reads
them as it reads a real job's (the pid is this process's, under another start time: not running)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import tvm
import tvm.s_tir.meta_schedule as ms

from workbench.engine.base.step import Step
from workbench.engine.session.session import Session, State, replay
from workbench.engine.build.targets import target_from
from workbench.engine.tuning.database import open_database
from workbench.engine.tuning.jobs.handle import Job
from workbench.engine.tuning.jobs.spec import session_job_spec


def job_folder(folder: Path, start: Session, stage: str, rows: list[dict], *, owner: str | None = None,
               result: dict | None = None, stopped: bool = False) -> Job:
    """A finished (``result``: result.json's keys) or stopped session job of ``start``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(json.dumps(session_job_spec(start, stage, max(2, len(rows)))))
    (folder / "queue.json").write_text(json.dumps({"folder": str(folder / "q"), "limit": 1, "ticket": "t",
                                                   "owner": owner}))
    (folder / "pid.json").write_text(json.dumps({"pid": os.getpid(), "started": 1.0}))
    (folder / "progress.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if result is not None:
        (folder / "result.json").write_text(json.dumps(result))
    if stopped:
        (folder / "stopped").touch()
    job = Job.attach(folder)
    assert job is not None and not job.running()
    return job


def loop_records(folder: Path, state: State, bests: Iterable[tuple[str, list[float]]]) -> None:
    """A loop-only run's database (``work/loop``): for each (kernel, run times in s), a record of
    the kernel's unscheduled trace."""
    db = open_database(folder / "work" / "loop")
    target = target_from(state.session.target)
    for kernel, run_secs in bests:
        func = state.program.funcs[kernel]
        mod = tvm.IRModule({"main": func})
        workload = db.commit_workload(mod)
        trace = tvm.s_tir.Schedule(mod).trace
        db.commit_tuning_record(ms.database.TuningRecord(trace, workload, run_secs, target,
                                                         ms.arg_info.ArgInfo.from_prim_func(func)))


def rows(task: str, latencies: list[float | None], stage: str = "loop") -> list[dict]:
    """Progress lines of ``task``, one a second from t = 10."""
    return [{"task": task, "stage": stage, "trial": i + 1, "layout": None, "latency_ms": lat, "error": None,
             "best_ms": None, "time": 10.0 + i} for i, lat in enumerate(latencies)]


def tuned_conv(start: Session, latency_ms: float = 0.5) -> State:
    """``start`` (r18_stem) with its conv tuned as a result gives it: a ``tuned`` step of its
    unscheduled trace, measured at ``latency_ms``."""
    return replay(start).push(Step.make("tuned", "conv", "tuned", stage="loop", trace=[[], []], latency_ms=latency_ms))
