"""A stopped run's best so far (issue #45, found 6: a loop-only run stopped after 26 measurements
had a conv at 0.728 ms, and nothing applied it or said why): the kernels measured take their
best trace; a joint run, or one that measured nothing, says why it cannot be applied."""

from workbench.engine.session.session import new_session, replay
from workbench.engine.tuning.jobs.partial import partial_reason, partial_result

from tests.engine.tuning.job_helpers import job_folder, loop_records, rows


def test_a_stopped_loop_runs_measured_kernels_take_their_best_trace(tmp_path):
    start = replay(new_session("r18_stem"))
    loop_records(tmp_path, start, [("conv", [0.000912]), ("conv", [0.000728]), ("conv", [1e10])])  # 1e10: failed
    got = partial_result(start.session, "loop", tmp_path / "work", rows("conv", [0.912, 0.728, None]))
    assert got.reason == "" and got.state is not None
    (conv,) = got.kernels
    assert (conv.kernel, round(conv.best_ms, 6), conv.measurements, conv.kept) == ("conv", 0.728, 3, True)
    tuned = [s for s in got.state.session.steps if s.kind == "tuned"]
    assert [(s.target, round(s.get("latency_ms"), 6), s.get("stage")) for s in tuned] == [("conv", 0.728, "loop")]
    assert got.state.kernel_schedule("conv").kind == "tuned"
    assert got.state.kernel_schedule("pad").kind != "default"  # as a finished run leaves it: its analytic schedule
    assert replay(got.state.session).session.key() == got.state.session.key()  # the applied session replays
    assert got.text().startswith("1 kernel takes its best trace so far: conv 0.7280 ms (3 measurements)")


def test_a_job_reads_its_own_best_so_far(tmp_path):
    start = replay(new_session("r18_stem"))
    job = job_folder(tmp_path / "job", start.session, "loop", rows("conv", [0.75]), stopped=True)
    loop_records(job.dir, start, [("conv", [0.00075])])
    assert job.status().state == "stopped" and job.stage == "loop"
    got = job.partial_result()
    assert [k.kernel for k in got.kernels] == ["conv"] and got.state is not None


def test_why_a_best_so_far_cannot_be_applied():
    session = new_session("r18_stem")
    joint = partial_result(session, "joint", "/nonexistent", rows("conv", [0.9, 0.8], stage="joint"))
    assert joint.state is None and joint.reason.startswith("a joint run that ended before its result cannot be "
                                                           "applied in part")
    assert "2 measurements stay in the job's folder" in joint.reason and "loop-only stage" in joint.reason
    failed = partial_result(session, "loop", "/nonexistent", rows("conv", [None, None]))
    assert failed.state is None and failed.reason == partial_reason("loop", []) != ""
    assert "no kernel has a successful measurement" in failed.reason
    gone = partial_result(session, "loop", "/nonexistent", rows("conv", [0.9]))
    assert gone.state is None and "database is missing" in gone.reason
