"""The loop-only stage: MetaSchedule (XGBoost cost model, evolutionary search) on kernels, with
live progress (``progress``) and optional RPC measurement (``rpc``).

Each kernel's expert schedule is measured first and seeds the search (``seed``; the
cost model ranks candidates after ``options.warmup_samples`` measurements).
Records go to a MetaSchedule ``JSONDatabase`` in ``work_dir`` (``database``), so nothing
measured is lost; a run started again on the same folder resumes: the records already there
are kept, **count toward the budget**, seed the evolutionary search and take part in the best
result.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import tvm
import tvm.s_tir.meta_schedule as ms

from ..base.errors import BuildError, TuneError
from ..build.targets import target_from
from .database import best_record, open_database, task_result
from .options import TuneOptions, budget_shares
from .progress import ProgressWriter, repair_jsonl
from .records import TuneResult, TuneTask, short_error
from .runner import InProcessRunner, Measurers
from .seed import measure_seed, measure_traces
from .startup import children_import_workbench, import_tensor_intrinsics

__all__ = ["tune_loops"]


def tune_loops(tasks: Sequence[TuneTask], target: dict, work_dir: Path, budget: int,
               options: TuneOptions = TuneOptions(), *, stage: str = "loop", layout_label: str | None = None,
               measurers: Measurers | None = None) -> dict[str, TuneResult]:
    """Tune ``tasks`` with MetaSchedule (XGBoost cost model, evolutionary search) in at most
    ``budget`` hardware measurements in all, and return each task's best result.

    The budget is split across tasks in proportion to their FLOPs (``budget_shares``, at least
    one measurement each); the tasks are tuned one after another, smallest share first, and a
    share a task cannot use (its search space is exhausted) passes to the next. Records go to a
    ``JSONDatabase`` in ``work_dir``. **Resuming**: records already there (failed ones included)
    count toward the budget and toward each task's share, seed the search (it measures no
    candidate twice) and take part in the best result; a run on a folder that holds ``budget``
    records measures nothing. Progress lines carry ``stage`` and ``layout_label``.

    Candidates are built and timed in this process (a build that takes longer than
    ``options.build_timeout_s`` recorded as failed, ``runner.built_within``) unless
    ``options.isolated``: then ``LocalBuilder(timeout_sec=options.build_timeout_s)`` and
    ``LocalRunner`` run them in TVM's worker processes, so a crashing or hanging candidate is
    also recorded with its error and skipped
    (at a start-up cost of seconds per process and per batch of builds). With
    ``options.rpc`` the builds stay local and the candidates are timed on the tracker's servers;
    a tracker without servers for the key is refused up front and a server that stops answering
    fails its measurements after ``rpc.timeout_s``. ``measurers`` keeps TVM's worker pools between
    calls (by default they are made for this call and ended after it).

    Raises
    ------
    TuneError
        No tasks, duplicate names, a target without ``num-cores``, a budget smaller than the
        number of tasks, an unreachable RPC tracker or key, or an RPC run where no measurement
        succeeded.
    """
    if not tasks:
        raise TuneError("nothing to tune")
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise TuneError(f"task names must be unique, got {names}")
    if "num-cores" not in target:
        raise TuneError('MetaSchedule needs "num-cores" in the target, e.g. {"kind": "llvm", "num-cores": 2}')
    shares = budget_shares([t.flops for t in tasks], budget)
    work_dir = Path(work_dir)
    db = open_database(work_dir)
    progress_path = options.progress_path
    if progress_path is not None:
        Path(progress_path).parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl(Path(progress_path))
    done = {t.name: best_record(db, t.func)[2] for t in tasks}
    left = budget - sum(done.values())
    if left > 0:
        try:  # target_from also gives TVM every core, before MetaSchedule's runner processes inherit it
            tgt = target_from(target)
        except BuildError as e:
            raise TuneError(str(e)) from None
        import_tensor_intrinsics()  # MetaSchedule's TuneContext imports them, slowly without ``startup``'s light stack
        with ExitStack() as scope:
            scope.enter_context(children_import_workbench())
            if measurers is None:
                measurers = scope.enter_context(Measurers())
            builder, runner = measurers.pair(options.rpc, options.isolated, options.build_timeout_s,
                                             options.cold)
            model = ms.cost_model.XGBModel(num_tuning_cores=int(target["num-cores"]), tree_method="auto",
                                           num_warmup_samples=options.warmup_samples)
            seed = options.seed
            rand = ms.utils.fork_seed(seed, n=len(tasks)) if seed is not None else [-1] * len(tasks)
            callbacks, carry = [], 0
            for i in sorted(range(len(tasks)), key=lambda i: shares[i]):
                task, want = tasks[i], min(left, max(0, shares[i] - done[tasks[i].name]) + carry)
                if want <= 0:
                    continue
                callback = ProgressWriter(progress_path, task.name, stage, layout_label, done[task.name],
                                          best_record(db, task.func)[0], model)
                callbacks.append(callback)
                if isinstance(runner, InProcessRunner):  # its cut-off is per task
                    runner.start_task()
                if options.expert_seed and done[task.name] == 0:
                    measure_seed(task, target, tgt, db, builder, runner, callback)
                if done[task.name] == 0 and want > callback.done:
                    measure_traces(task, tgt, db, builder, runner, callback)
                if want > callback.done - done[task.name]:
                    rest = want - (callback.done - done[task.name])
                    _tune_one(task, tgt, work_dir, rest, min(options.num_trials_per_iter, rest), rand[i],
                              (builder, runner, db, model), callback, options.population_size,
                              options.genetic_num_iters)
                measured = callback.done - done[task.name]
                carry, left = want - measured, left - measured
        rpc = options.rpc
        if rpc is not None and callbacks and not any(c.ok for c in callbacks):
            first = next((e for c in callbacks for e in c.errors), "nothing was measured")
            raise TuneError(f"no measurement through the RPC tracker {rpc.host}:{rpc.port} (key {rpc.key!r}) "
                            f"succeeded: {first}")
    return {t.name: task_result(db, t) for t in tasks}


def _callbacks(progress: ProgressWriter) -> list:
    """MetaSchedule's default callbacks with ours after ``AddToDatabase`` (a progress line is
    written only for a committed record) and before ``UpdateCostModel`` (``predicted`` comes
    from the model that chose the batch)."""
    default = list(ms.MeasureCallback.create("default"))
    at = next((i + 1 for i, c in enumerate(default) if isinstance(c, ms.measure_callback.AddToDatabase)), 0)
    return [*default[:at], progress, *default[at:]]


def _tune_one(task: TuneTask, target: tvm.target.Target, work_dir: Path, trials: int, per_iter: int, rand: int,
              machinery: tuple[Any, Any, Any, Any], callback: ProgressWriter, population: int,
              generations: int = 3) -> None:
    """One task's MetaSchedule run; ``machinery`` is its (builder, runner, database, cost model)."""
    builder, runner, db, model = machinery
    # TVM's population of 512 made the search most of a measurement's time (measured:
    # benchmarks/results/2026-11-27-b128-names); a smaller one explores budgets of 64-256 as well
    search = ms.search_strategy.EvolutionarySearch(population_size=population, genetic_num_iters=generations,
                                                   init_min_unmeasured=min(50, population // 2))
    ctx = ms.TuneContext(mod=tvm.IRModule({"main": task.func}), target=target, space_generator="post-order-apply",
                         search_strategy=search, task_name=task.name, rand_state=rand)
    try:
        ms.tune.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=str(work_dir), max_trials_global=trials,
                           max_trials_per_task=trials, num_trials_per_iter=per_iter, builder=builder,
                           runner=runner, database=db, cost_model=model, measure_callbacks=_callbacks(callback))
    except Exception as e:
        raise TuneError(f"tuning {task.name} failed: {short_error(e)}") from None
