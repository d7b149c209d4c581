"""A stage's MetaSchedule ``JSONDatabase`` (in its ``work_dir``, so nothing measured is lost and a
run started again on the same folder resumes) and the best record of a kernel in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tvm
import tvm.s_tir.meta_schedule as ms

from ..base.errors import TuneError
from .progress import repair_jsonl
from .records import TuneResult, TuneTask, latency_ms, plain, short_error

__all__ = ["open_database", "best_record", "task_result"]


def open_database(work_dir: Path) -> ms.database.JSONDatabase:
    """The database in ``work_dir`` (created if absent; a half-written last record is dropped)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    paths = work_dir / "database_workload.json", work_dir / "database_tuning_record.json"
    for p in paths:
        repair_jsonl(p)
    try:
        return ms.database.JSONDatabase(path_workload=str(paths[0]), path_tuning_record=str(paths[1]))
    except Exception as e:
        raise TuneError(f"the MetaSchedule database in {work_dir} cannot be read: {short_error(e)}") from None


def _records(db: ms.database.Database, func: tvm.tirx.PrimFunc) -> list:
    """Every record of ``func``, failed ones (run_secs = [1e10], builds included) too:
    ``get_top_k`` leaves those out."""
    mod = tvm.IRModule({"main": func})
    if not db.has_workload(mod):
        return []
    wl = db.commit_workload(mod)
    return [r for r in db.get_all_tuning_records() if r.workload.same_as(wl)]


def best_record(db: ms.database.Database, func: tvm.tirx.PrimFunc) -> tuple[float | None, Any, int]:
    """Best latency (ms), its trace as plain JSON, and the number of records of ``func`` in ``db``."""
    recs = _records(db, func)
    good = [(lat, r) for r in recs if (lat := latency_ms(r.run_secs)) is not None]
    if not good:
        return None, None, len(recs)
    lat, r = min(good, key=lambda x: x[0])
    return lat, plain(r.trace.as_json()), len(recs)


def task_result(db: ms.database.Database, task: TuneTask) -> TuneResult:
    """``task``'s ``TuneResult`` from the records in ``db``."""
    recs = _records(db, task.func)
    best, trace, n = best_record(db, task.func)
    failed = sum(1 for r in recs if latency_ms(r.run_secs) is None)
    return TuneResult(task.name, best, trace, n, failed, int(task.flops))
