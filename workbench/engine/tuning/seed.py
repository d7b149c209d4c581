"""The expert schedule as a tuning's first measurement (seeding).

Before MetaSchedule searches a kernel, its expert schedule (``policy.analytic_steps``) is built,
timed by the same builder and runner as every candidate and committed to the stage's database
as an ordinary tuning record. So the seed

- is measured first and counts toward the budget;
- enters the evolutionary search's initial population (``EvolutionarySearch`` takes the
  database's best records as a share of it) and trains the cost model from the first batch on;
- takes part in the best result: a tuning never returns a kernel slower than its seed measured
  in the same run, because ``database.task_result`` is the best of all the task's records.
"""

from __future__ import annotations

from typing import Any, Mapping

import tvm
import tvm.s_tir.meta_schedule as ms

from ..base.errors import WorkbenchError
from ..loops.primitives import apply_steps, apply_trace_json
from ..schedules.policy import analytic_steps
from .progress import ProgressWriter
from .records import TuneTask

__all__ = ["measure_seed", "measure_traces"]


def measure_seed(task: TuneTask, target: Mapping, tgt: tvm.target.Target, db: ms.database.Database,
                 builder: Any, runner: Any, callback: ProgressWriter) -> bool:
    """Measure ``task``'s expert schedule and commit it to ``db`` (a failed build or run is
    committed as failed, like any candidate); False when the kernel has no expert schedule."""
    try:
        sch = apply_steps(task.func, analytic_steps(task.func, task.name, target))
    except WorkbenchError:  # no template fits this kernel: the search starts unseeded
        return False
    _measure(task, sch, tgt, db, builder, runner, callback)
    return True


def measure_traces(task: TuneTask, tgt: tvm.target.Target, db: ms.database.Database, builder: Any, runner: Any,
                   callback: ProgressWriter) -> int:
    """Measure each of ``task.seeds`` (saved traces) that applies to its kernel, as ``measure_seed``
    does the expert schedule; the number measured."""
    done = 0
    for trace in task.seeds:
        try:
            sch = apply_trace_json(task.func, trace)
        except Exception:  # noqa: BLE001 - a trace of another form of the kernel: not a seed here
            continue
        _measure(task, sch, tgt, db, builder, runner, callback)
        done += 1
    return done


def _measure(task: TuneTask, sch: Any, tgt: tvm.target.Target, db: ms.database.Database, builder: Any,
             runner: Any, callback: ProgressWriter) -> None:
    args_info = ms.arg_info.ArgInfo.from_prim_func(task.func)
    (built,) = builder.build([ms.builder.BuilderInput(sch.mod, tgt)])
    if built.error_msg:
        ran = ms.runner.RunnerResult(None, built.error_msg)
    else:
        (future,) = runner.run([ms.runner.RunnerInput(built.artifact_path, _device_type(tgt), args_info)])
        ran = future.result()
    run_secs = [float(s) for s in ran.run_secs] if ran.run_secs and not ran.error_msg else [1e10]
    workload = db.commit_workload(tvm.IRModule({"main": task.func}))
    db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, run_secs, tgt, args_info))
    callback.record([ms.MeasureCandidate(sch, args_info)], [built], [ran])


def _device_type(tgt: tvm.target.Target) -> str:
    """The runner's device name for ``tgt`` (``cpu`` for ``llvm``, as MetaSchedule's own loop uses)."""
    return tvm.runtime.Device._DEVICE_TYPE_TO_NAME[tgt.get_target_device_type()]
