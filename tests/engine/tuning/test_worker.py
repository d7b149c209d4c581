"""The tuning worker process: start, watch, stop (nothing left over), resume, failure reports."""

import json
import time

import psutil
import pytest
import tvm

from workbench.engine.errors import TuneError
from workbench.engine.targets import DEFAULT_TARGET as TARGET
from workbench.engine.session import new_session
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.rpc import RpcConfig
from workbench.engine.tuning.worker import Job, job_spec, session_job_spec, start_job, tasks_from_spec


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _records(job_dir) -> list[str]:
    path = job_dir / "work" / "database_tuning_record.json"
    return [ln for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def test_spec_round_trips_the_primfunc(mm_task):
    options = TuneOptions(rpc=RpcConfig.parse("127.0.0.1:9190:k"), isolated=True)
    spec = json.loads(json.dumps(job_spec([mm_task], TARGET, 8, options)))
    (back,) = tasks_from_spec(spec)
    tvm.ir.assert_structural_equal(back.func, mm_task.func)
    assert (back.name, back.flops, spec["rpc"], spec["isolated"]) == ("mm", mm_task.flops, "127.0.0.1:9190:k", True)
    with pytest.raises(TuneError, match="format"):
        tasks_from_spec({"tasks": []})


def test_a_session_spec_refuses_a_bad_stage_or_share():
    s = new_session("gmm", m=64, n=64, k=64)
    spec = session_job_spec(s, "joint", 8, TuneOptions(joint_fraction=0.5, search="random", seed=None))
    assert (spec["kind"], spec["joint_fraction"], spec["search"], spec["seed"]) == ("session", 0.5, "random", None)
    with pytest.raises(TuneError, match="stage"):
        session_job_spec(s, "both", 8)
    with pytest.raises(TuneError, match="strictly between 0 and 1"):
        session_job_spec(s, "joint", 8, TuneOptions(joint_fraction=1.0))


def test_stop_leaves_no_process_and_a_new_job_resumes(tmp_path, mm_task):
    job_dir = tmp_path / "job"
    spec = job_spec([mm_task], TARGET, 8, TuneOptions(num_trials_per_iter=4, isolated=True))
    job = start_job(spec, job_dir)
    end = time.monotonic() + 300
    while not job.progress():
        assert job.running(), job.status()
        assert time.monotonic() < end, "no measurement within 300 s"
        time.sleep(0.3)
    assert job.status().state == "running"
    with pytest.raises(TuneError, match="already running"):
        start_job(spec, job_dir)
    group = [psutil.Process(job.pid), *psutil.Process(job.pid).children(recursive=True)]
    assert len(group) > 1  # TVM's build/run workers
    assert job.stop().state == "stopped"
    assert not _alive(group)
    assert Job.attach(job_dir).status().state == "stopped" and job.result() is None
    first, kept = job.progress(), _records(job_dir)
    assert 1 <= len(first) <= len(kept) < 8  # a progress line is written once its record is in the database

    job2 = start_job(spec, job_dir)  # same folder: resumes
    status = job2.wait(timeout=400)
    assert status.state == "done", status
    rows, records = job2.progress(), _records(job_dir)
    assert rows[:len(first)] == first and records[:len(kept)] == kept  # nothing measured was lost
    trials = [r["trial"] for r in rows]
    assert trials == sorted(set(trials)) and trials[-1] == 8 and len(records) == 8
    assert len({json.dumps(json.loads(r)[1][0]) for r in records}) == 8  # no candidate measured twice
    res = job2.result()["mm"]
    assert res.measurements == 8 and res.best_ms == pytest.approx(
        min(r["latency_ms"] for r in rows if r["latency_ms"] is not None))
    assert not (job_dir / "tmp").exists() or not any((job_dir / "tmp").iterdir())


def test_a_failing_job_reports_its_error(tmp_path, mm_task):
    spec = job_spec([mm_task], {"kind": "llvm"}, 4)  # MetaSchedule needs num-cores
    job = start_job(spec, tmp_path / "job")
    status = job.wait(timeout=120)
    assert status.state == "failed" and "num-cores" in status.error
    assert job.result() is None
