"""Loop-only MetaSchedule stage: progress lines, re-applicable traces, resume, failing
candidates and refused requests. Budgets are a few measurements."""

import numpy as np
import pytest
import tvm

from workbench.engine.base.errors import TuneError
from workbench.engine.build.targets import DEFAULT_TARGET as TARGET
from workbench.engine.tuning.loop import tune_loops
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.progress import read_progress

FIELDS = {"task", "stage", "trial", "layout", "trace_id", "latency_ms", "error", "predicted", "best_ms", "time"}


def test_tune_loops_writes_progress_and_a_trace_that_rebuilds_the_kernel(tmp_path, rng, mm_task):
    prog = tmp_path / "progress.jsonl"
    res = tune_loops([mm_task], TARGET, tmp_path / "wd", 8, TuneOptions(progress_path=prog, num_trials_per_iter=4),
                     layout_label="default")["mm"]
    rows = read_progress(prog)
    assert len(rows) == res.measurements == 8
    assert all(set(r) == FIELDS for r in rows)
    assert [r["trial"] for r in rows] == list(range(1, 9))
    assert {(r["task"], r["stage"], r["layout"]) for r in rows} == {("mm", "loop", "default")}
    assert len({r["trace_id"] for r in rows}) == 8  # no candidate measured twice
    lats = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    assert lats and res.best_ms == pytest.approx(min(lats)) and res.gflops > 0
    bests = [r["best_ms"] for r in rows if r["best_ms"] is not None]
    assert bests == sorted(bests, reverse=True) and bests[-1] == pytest.approx(res.best_ms)

    # the best trace re-applies to the task's PrimFunc and the kernel matches NumPy
    lib = tvm.compile(tvm.IRModule({"main": res.scheduled(mm_task.func)}), target=tvm.target.Target(TARGET))
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    dev = tvm.cpu()
    c = tvm.runtime.tensor(np.zeros((64, 64), "float32"), dev)
    lib["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)

    # resume: the records already there count toward the budget, so nothing more is measured
    again = tune_loops([mm_task], TARGET, tmp_path / "wd", 8, TuneOptions(progress_path=prog))["mm"]
    assert again == res and len(read_progress(prog)) == 8


def test_a_candidate_that_fails_to_build_is_recorded_and_tuning_goes_on(tmp_path, mm_task):
    prog = tmp_path / "progress.jsonl"
    options = TuneOptions(progress_path=prog, num_trials_per_iter=2, isolated=True, build_timeout_s=0.001)
    res = tune_loops([mm_task], TARGET, tmp_path / "wd", 4, options)["mm"]
    rows = read_progress(prog)
    assert [r["trial"] for r in rows] == [1, 2, 3, 4]  # both batches ran
    assert all(r["latency_ms"] is None and r["best_ms"] is None for r in rows)
    assert all(r["error"].startswith("LocalBuilder: Timeout") for r in rows)
    assert (res.best_ms, res.trace, res.measurements, res.failed) == (None, None, 4, 4)
    with pytest.raises(TuneError, match="no successful measurement"):
        res.scheduled(mm_task.func)


def test_bad_requests_are_refused(tmp_path, mm_task):
    with pytest.raises(TuneError, match="nothing to tune"):
        tune_loops([], TARGET, tmp_path, 4)
    with pytest.raises(TuneError, match="num-cores"):
        tune_loops([mm_task], {"kind": "llvm"}, tmp_path, 4)
    with pytest.raises(TuneError, match="unique"):
        tune_loops([mm_task, mm_task], TARGET, tmp_path, 4)
    with pytest.raises(TuneError, match="cannot give each of 1 kernels one"):
        tune_loops([mm_task], TARGET, tmp_path, 0)


def test_the_expert_seed_is_measured_first_and_nothing_returned_is_slower(tmp_path, mm_task):
    from workbench.engine.schedules.expert import expert_steps
    from workbench.engine.loops.primitives import apply_steps
    from workbench.engine.tuning.progress import _trace_id

    prog = tmp_path / "progress.jsonl"
    res = tune_loops([mm_task], TARGET, tmp_path / "wd", 3, TuneOptions(progress_path=prog, num_trials_per_iter=2))["mm"]
    rows = read_progress(prog)
    seed = apply_steps(mm_task.func, expert_steps(mm_task.func, "mm", TARGET))
    assert rows[0]["trace_id"] == _trace_id(seed.trace.as_json())  # the seed, measured in this run
    assert rows[0]["latency_ms"] is not None and res.measurements == 3
    assert res.best_ms <= rows[0]["latency_ms"]
    # unseeded, the first measurement is MetaSchedule's own pick
    plain = tmp_path / "plain.jsonl"
    tune_loops([mm_task], TARGET, tmp_path / "wd2", 2, TuneOptions(progress_path=plain, expert_seed=False))
    assert read_progress(plain)[0]["trace_id"] != rows[0]["trace_id"]
