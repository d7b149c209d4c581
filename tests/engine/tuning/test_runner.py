"""The in-process runner's cut-off (``runner.InProcessRunner``): a candidate whose first run takes
``SLOW`` times its task's best so far is recorded with that run alone (one sample), the others get
TVM's full evaluator (``EVALUATOR.repeat`` samples); ``start_task`` forgets the best. Real
kernels, ~1700x apart in work: the assertions are on which path each candidate took."""

from __future__ import annotations

import contextlib
import os
import threading

import numpy as np
import pytest
import tvm
import tvm.s_tir.meta_schedule as ms
from tvm import s_tir
from tvm.s_tir.meta_schedule.arg_info import ArgInfo

from workbench.engine.build.targets import DEFAULT_TARGET, target_from
from .conftest import matmul
from workbench.engine.tuning import runner as runner_mod
from workbench.engine.tuning.runner import COLD_EVALUATOR, EVALUATOR, InProcessRunner, Measurers
from workbench.engine.tuning.startup import import_tensor_intrinsics


@pytest.fixture(scope="module")
def kernels():
    """A fast kernel (32^3 multiply-adds, microseconds) and one ~1700x slower (384^3, tens of
    milliseconds: longer than a repeat of the evaluator), unscheduled, as the builder builds them."""
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build

    import_tensor_intrinsics()  # as the tuner does before its first build (~30 s without)
    tgt = target_from(DEFAULT_TARGET)
    return {n: (default_build(tvm.IRModule({"main": matmul(n)}), tgt, None), ArgInfo.from_prim_func(matmul(n)))
            for n in (32, 384)}


def _run(runner, kernels, n):
    rt, infos = kernels[n]
    key = f"/scratch/{n}-{len(runner.built)}-{id(rt)}"
    runner.built[key] = rt
    (future,) = runner.run([ms.runner.RunnerInput(key, "cpu", infos)])
    res = future.result()
    assert res.error_msg is None, res.error_msg
    return [float(x) for x in res.run_secs]


def test_a_candidate_far_slower_than_the_best_is_timed_by_one_run(kernels):
    runner = InProcessRunner(EVALUATOR, {})
    first = _run(runner, kernels, 32)  # no best yet: the evaluator, three repeats
    assert len(first) == EVALUATOR.repeat
    assert runner.best == pytest.approx(float(np.median(first)))
    slow = _run(runner, kernels, 384)
    assert len(slow) == 1 # cut off after its first run
    assert slow[0] > max(runner_mod.SLOW * runner.best, EVALUATOR.min_repeat_ms / 1e3)
    again = _run(runner, kernels, 32)  # as fast as the best, or under a repeat: the evaluator again
    assert len(again) == EVALUATOR.repeat


def test_a_new_task_forgets_the_best(kernels):
    runner = InProcessRunner(EVALUATOR, {})
    _run(runner, kernels, 32)
    runner.start_task()
    assert runner.best is None
    slow = _run(runner, kernels, 384)  # the new task's first candidate: fully timed
    assert len(slow) == EVALUATOR.repeat


def test_a_cold_tuning_times_each_candidate_call_by_call_on_flushed_caches(kernels):
    with Measurers() as measurers:
        _, warm = measurers.pair(None, False, 10.0)
        _, cold = measurers.pair(None, False, 10.0, cold=True)
    assert not warm.config.enable_cpu_cache_flush
    assert cold.config.enable_cpu_cache_flush and cold.config.number == 1 and cold.config.min_repeat_ms == 0
    runner = InProcessRunner(COLD_EVALUATOR, {})
    for n in (32, 384):  # each through TVM's evaluator with its cache-flushing preprocessor
        runner.start_task()
        secs = _run(runner, kernels, n)
        assert len(secs) == COLD_EVALUATOR.repeat and min(secs) > 0


def _unrolled_matmul(unroll_i: int, unroll_j: int) -> tvm.IRModule:
    """A 256^3 matmul whose i x j tile is unrolled: LLVM's build time grows with the tile
    (8 x 32: ~2 s here, 2 x 2: milliseconds)."""
    sch = s_tir.Schedule(matmul(256))
    i, j, _ = sch.get_loops(sch.get_sblock("C"))
    sch.unroll(sch.split(j, [None, unroll_j])[1])
    sch.unroll(sch.split(i, [None, unroll_i])[1])
    return sch.mod


def test_a_build_past_the_timeout_is_recorded_as_failed_and_left_in_the_idle_class(tmp_path):
    import_tensor_intrinsics()
    tgt = target_from(DEFAULT_TARGET)
    built = {}
    builder = runner_mod.InProcessBuilder(built, tmp_path, timeout_s=0.05)
    (res,) = builder.build([ms.builder.BuilderInput(_unrolled_matmul(8, 32), tgt)])
    assert res.artifact_path is None and "longer than 0.05 s" in res.error_msg
    left = [t for t in threading.enumerate() if t.name == "candidate-build"]
    assert left and runner_mod.builds_left_running()
    for t in left:
        with contextlib.suppress(ProcessLookupError):  # it may just have ended
            assert os.sched_getscheduler(t.native_id) == os.SCHED_IDLE
    quick = runner_mod.InProcessBuilder(built, tmp_path, timeout_s=60)
    (ok,) = quick.build([ms.builder.BuilderInput(_unrolled_matmul(2, 2), tgt)])
    assert ok.error_msg is None and ok.artifact_path in built
    for t in left:  # not into the next tests
        t.join()
    assert not runner_mod.builds_left_running()
