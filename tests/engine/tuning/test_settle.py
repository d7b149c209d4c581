"""A tuned network runs the kernels its tuner measured (#48): kernels that a later layout changed
are tuned again in their final form (``settle``); each tuned kernel rebuilds to the TIR of its best
record; the invariant names a kernel that runs slower than measured; the fastest of the tuned
network, its seeds and its start is kept."""

import tvm_ffi
import pytest

from workbench.engine.base.errors import TuneWarning
from workbench.engine.loops.primitives import apply_trace_json
from workbench.engine.session.session import dumps, loads, new_session, replay
from workbench.engine.base.step import Step
from workbench.engine.tuning.check import KernelCheck, check_kernels, check_state, slow_kernels, tuned_figures
from workbench.engine.tuning.database import best_record, open_database
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.settle import SETTLE_STAGE, settle, unsettled
from workbench.engine.tuning.stages import tune_network

FIXED = TuneOptions(keep_faster=False)


def _best_tir(work_dir, func):
    """The scheduled TIR of ``func``'s best record over every database under ``work_dir``."""
    best = None
    for wd in {p.parent for p in work_dir.rglob("database_tuning_record.json")}:
        ms, trace, _ = best_record(open_database(wd), func)
        if ms is not None and (best is None or ms < best[0]):
            best = ms, trace
    assert best is not None, "no record of this kernel"
    return apply_trace_json(func, best[1]).mod["main"]


def _tuned_conv1(budget=2):
    """r18_block with conv1 tuned on its present form (expert seed + search), as the joint stage
    leaves it, and what it was measured on."""
    state = replay(new_session("r18_block"))
    return state, state.program.funcs["conv1"]


def test_a_kernel_that_a_later_layout_changed_is_tuned_again_in_its_final_form(tmp_path):
    from workbench.engine.tuning.loop import tune_loops
    from workbench.engine.tuning.records import TuneTask

    state, func = _tuned_conv1()
    res = tune_loops([TuneTask("conv1", func, 1)], state.session.target, tmp_path / "first", 2, FIXED)["conv1"]
    state = state.push(Step.make("tuned", "conv1", "tuned", stage="joint+loop", trace=res.trace,
                                 latency_ms=res.best_ms, measurements=2))
    measured = {"conv1": func}
    assert unsettled(state, measured) == ["conv2"]  # conv2 was never tuned; conv1 is as measured
    # conv2's tiled input is written by conv1's epilogue: conv1's kernel changes and loses its trace
    state = state.push(Step.make("preset", "conv2", "alt_tiled", tiles=[8, 8], ot=16, it=16))
    assert state.kernel_schedule("conv1").kind == "default"
    assert set(unsettled(state, measured)) == {"conv1", "conv2"}
    settled, names = settle(state, measured, {"conv1": res.trace}, tmp_path / "settle", 4, FIXED)
    assert set(names) == {"conv1", "conv2"} and not unsettled(settled, {k: settled.program.funcs[k] for k in names})
    for k in names:
        step = [s for s in settled.session.steps if s.kind == "tuned" and s.target == k][-1]
        assert step.get("stage") == SETTLE_STAGE and step.get("latency_ms") > 0
        # the very TIR its tuning measured best
        assert tvm_ffi.structural_equal(settled.scheduled_func(k),
                                        _best_tir(tmp_path / "settle", settled.program.funcs[k]))
    assert replay(loads(dumps(settled.session))).scheduled_program().build().verify().ok


def test_a_tuned_network_rebuilds_to_the_tir_of_its_tuners_best_records(tmp_path):
    state = replay(new_session("r18_block"))
    tuned = tune_network(state.session, "joint", 6, tmp_path / "wd", FIXED)
    done = replay(loads(dumps(tuned.session)))
    kernels = [k.name for k in done.program.plan.kernels if k.ops and done.graph.node(k.head).kind == "complex"]
    assert kernels and all(done.kernel_schedule(k).kind == "tuned" for k in kernels)
    for k in kernels:
        assert tvm_ffi.structural_equal(done.scheduled_func(k), _best_tir(tmp_path / "wd", done.program.funcs[k])), k
    assert set(tuned_figures(done)) == set(kernels)
    assert {c.kernel for c in tuned.checks} == set(kernels)
    assert done.scheduled_program().build().verify().ok


def test_check_kernels_names_only_kernels_slower_than_measured():
    checks = check_kernels({"a": 1.0, "b": 1.0, "c": 2.0}, {"a": 1.2, "b": 1.5, "c": 1.0, "d": 9.0})
    assert [c.kernel for c in checks] == ["a", "b", "c"]  # d has no tuned figure
    (slow,) = slow_kernels(checks)
    assert slow.kernel == "b" and "1.50x" in slow.text() and "1.5 ms" in slow.text()
    assert KernelCheck.from_json(slow.to_json()) == slow


def test_the_invariant_flags_a_kernel_whose_schedule_was_swapped_for_a_slower_one(tmp_path):
    state = replay(new_session("r18_block"))
    tuned = replay(tune_network(state.session, "joint", 4, tmp_path / "wd", FIXED).session)
    step = [s for s in tuned.session.steps if s.kind == "tuned" and s.target == "conv1"][-1]
    # the same layouts and the tuning's figure, but an empty trace: the kernel unscheduled
    swapped = tuned.push(Step.make("tuned", "conv1", "tuned", stage=step.get("stage"), layouts=step.get("layouts") or [],
                                   trace=[[], []], latency_ms=step.get("latency_ms"), measurements=0))
    assert "conv1" in [c.kernel for c in slow_kernels(check_state(swapped))]


def test_more_budget_never_returns_a_slower_network_than_its_seeds(tmp_path):
    """The two-budget order with the timing stubbed: the larger budget's tuned network is timed
    slowest, so the smaller budget's result, given as a seed, is kept."""
    session = new_session("r18_block")
    times = {"tuned": 1.0, "expert": 2.0}
    small = tune_network(session, "joint", 4, tmp_path / "b4", time_networks=lambda states: {k: times[k] for k in states})
    assert small.kept == "tuned" and small.network_ms == times
    times = {"tuned": 3.0, "expert": 2.0, "budget 4": 1.0}
    with pytest.warns(TuneWarning, match="slower than the budget 4 network"):
        large = tune_network(session, "joint", 8, tmp_path / "b8", seeds={"budget 4": small.session},
                             time_networks=lambda states: {k: times[k] for k in states})
    assert large.kept == "budget 4" and large.session.steps == small.session.steps
    assert large.network_ms["budget 4"] <= small.network_ms["tuned"]


def test_a_session_jobs_report_says_which_kernels_run_slower_than_measured(tmp_path):
    import json

    from workbench.engine.tuning.jobs.worker import Job

    job = Job(tmp_path, 0, 0.0)
    assert job.network_report() == []  # before the end
    report = {"kept": "tuned", "network_ms": {"tuned": 2.0, "expert": 3.0}, "settled": ["conv2"],
              "checks": [{"kernel": "conv1", "tuned_ms": 1.0, "network_ms": 1.1},
                         {"kernel": "conv2", "tuned_ms": 0.452, "network_ms": 2.58}]}
    (tmp_path / "result.json").write_text(json.dumps({"session": {}, "network": report}))
    lines = job.network_report()
    assert any("conv2" in line and "tuned again" in line for line in lines)
    assert any("kept: tuned" in line for line in lines)
    (slow,) = [line for line in lines if line.startswith("warning:")]
    assert "kernel conv2" in slow and "5.71x the 0.452 ms" in slow
