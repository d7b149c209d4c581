"""A tuning result against its baselines (issue #45, found 7: "conv 0.4218 ms" with no speed-up
against the starting schedule, the expert schedule or the library): the figures, their spreads
and verdicts, and the worker that times them."""

import json

import pytest
import tvm

from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.session.session import new_session, replay
from workbench.engine.base.timing import Stats
from workbench.engine.tuning.jobs.baselines import (KernelBaselines, expert_kernels, measure_baselines, op_workload, read_report,
                                                    speedup_rows, total, tuned_kernels)
from workbench.engine.tuning.jobs.handle import Job
from workbench.engine.tuning.jobs.spec import baselines_job_spec
from workbench.engine.tuning.jobs.worker import run_job

from tests.engine.tuning.job_helpers import job_folder, rows, tuned_conv


def _kernel(name: str, tuned: float, **baselines: float) -> KernelBaselines:
    """A kernel whose samples lie within 1% of each median."""
    def stats(ms: float) -> Stats:
        return Stats(ms, ms * 0.99, ms * 1.01, 5)
    return KernelBaselines(name, stats(tuned), {k: stats(v) for k, v in baselines.items()}, "PyTorch (NCHW)",
                           {"expert": "no expert schedule: a test"} if "expert" not in baselines else {})


def test_the_library_call_of_a_gmm_and_a_transposed_conv():
    b = GraphBuilder("t")
    a = b.input("a", (8, 16), "MK")
    b.op("mm", "matmul", a, b.const("mm.weight", (32, 16), "NK"), transpose_b=True)
    x = b.input("x", (1, 4, 8, 8), "NCHW")
    b.op("up", "conv_transpose2d", x, b.const("up.weight", (4, 2, 3, 3), "IOHW"), stride=2, padding=1,
         output_padding=1)
    b.op("act", "relu", "up")
    g = b.build()
    mm, up = op_workload(g, "mm"), op_workload(g, "up")
    assert (mm.op, mm.input, mm.weight, mm.attrs) == ("matmul", (8, 16), (16, 32), {})  # B as (K, N)
    assert (up.op, up.weight, up.attrs["stride"], up.attrs["output_padding"]) == ("conv_transpose2d", (4, 2, 3, 3),
                                                                                   (2, 2), (1, 1))
    assert op_workload(g, "act") is None  # not a complex op: no library call of its own


def test_speed_ups_say_against_what_with_the_spread_and_when_within_noise():
    fast = _kernel("conv", 0.5, start=2.0, expert=0.502, library=1.0)
    assert fast.speedup("start") == pytest.approx(4.0)
    assert fast.text("start") == "4.00x (spread 2%)"
    assert fast.text("expert") == "1.00x, within noise (spread 2%)"  # the samples overlap
    slow = _kernel("pad", 0.2, start=0.1, library=0.05)
    assert slow.text("library") == "0.25x (spread 2%)"  # slower than the library: below 1
    assert slow.text("expert") == "not timed: no expert schedule: a test"
    assert KernelBaselines.from_json(json.loads(json.dumps(fast.to_json()))) == fast


def test_the_table_has_a_row_per_kernel_and_their_sum_over_the_baselines_all_have():
    kernels = [_kernel("conv", 0.5, start=2.0, expert=0.6, library=1.0), _kernel("pad", 0.1, start=0.2, library=0.1)]
    table = speedup_rows(kernels)
    assert [r["kernel"] for r in table] == ["conv", "pad", "all tuned kernels"]
    assert table[0]["vs library"] == "2.00x (spread 2%) (PyTorch (NCHW))"
    both = total(kernels)
    assert both.tuned.median_ms == pytest.approx(0.6) and both.speedup("start") == pytest.approx(2.2 / 0.6)
    assert "expert" not in both.baselines and table[-1]["vs expert schedule"] == "not timed: not for every kernel"
    assert [r["kernel"] for r in speedup_rows(kernels[:1])] == ["conv"]  # one kernel: no sum row


def test_a_report_comes_from_the_run_or_a_baselines_job_on_that_very_run():
    timed = {"started": 7.0, "baselines": [_kernel("conv", 0.5, start=1.0).to_json()]}
    assert read_report({"session": {}}, timed, 7.0).kernels[0].kernel == "conv"
    assert read_report({"session": {}}, timed, 8.0) is None  # a baselines job of an earlier run in the folder
    assert read_report({"baselines_error": "out of memory"}, None, 7.0).error == "out of memory"
    assert read_report(None, None, 7.0) is None


def test_tuned_kernels_are_those_the_result_adds_a_tuned_schedule_to():
    start = replay(new_session("r18_stem"))
    tuned = tuned_conv(start.session)
    assert tuned_kernels(start, tuned) == ["conv"] and tuned_kernels(start, start) == []


def test_the_expert_baseline_is_the_schedule_policys_for_a_softmax_too():
    """A softmax's expert baseline is its analytic schedule, the one the session's expert action
    pushes (not the register-blocked template of a complex op); a matmul's is the template."""
    start = replay(new_session("bert_tiny_layer", seq=16, hidden=32, heads=2))
    funcs, why = expert_kernels(start, ["softmax", "scores", "gone"])
    assert why == {"gone": "the starting layouts fuse this kernel otherwise"} and set(funcs) == {"softmax", "scores"}
    for k in funcs:
        tvm.ir.assert_structural_equal(funcs[k], start.with_expert_schedule(k).scheduled_func(k))


@pytest.mark.slow
def test_a_baselines_job_times_a_finished_runs_kernels_against_their_baselines(tmp_path):
    """The worker's side, on r18_stem: conv's result (its unscheduled trace) against the starting
    session (no schedule), conv's expert schedule and PyTorch, one interleaved round."""
    start = new_session("r18_stem")
    tuned = tuned_conv(start)
    job = job_folder(tmp_path / "job", start, "loop", rows("conv", [0.5]),
                     result={"session": tuned.session.to_json(), "network": {}})
    assert job.baselines() is None
    (job.dir / "baselines").mkdir()
    (job.dir / "baselines" / "spec.json").write_text(json.dumps(baselines_job_spec(job)))
    run_job(job.dir / "baselines")
    report = Job.attach(job.dir).baselines()
    assert report is not None and report.error == ""
    (conv,) = report.kernels
    assert conv.kernel == "conv" and set(conv.baselines) == {"start", "expert", "library"}
    assert conv.library.startswith("PyTorch") and conv.tuned.repeats >= 1
    assert all(s.median_ms > 0 for s in conv.baselines.values())
    assert measure_baselines(replay(start), replay(start)) == []  # nothing tuned: nothing to time
