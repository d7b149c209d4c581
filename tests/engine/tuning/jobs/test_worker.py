"""The job worker process: start, watch, stop (nothing left over), resume, failure reports, and a
baselines job that replays each session once."""

import json
import time

import psutil
import pytest

from workbench.engine.base.errors import TuneError
from workbench.engine.build.targets import DEFAULT_TARGET as TARGET
from workbench.engine.session.session import new_session
from workbench.engine.tuning.jobs.handle import Job, start_job
from workbench.engine.tuning.jobs.spec import baselines_job_spec, job_spec, session_job_spec
from workbench.engine.tuning.jobs.worker import run_job
from workbench.engine.tuning.options import TuneOptions

from tests.engine.tuning.job_helpers import job_folder, rows, tuned_conv


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


def test_stop_leaves_no_process_and_a_new_job_resumes(tmp_path, mm_task, queue):
    job_dir = tmp_path / "job"
    spec = job_spec([mm_task], TARGET, 8, TuneOptions(num_trials_per_iter=4, isolated=True))
    job = start_job(spec, job_dir, queue=queue)
    end = time.monotonic() + 300
    while not job.progress():
        assert job.running(), job.status()
        assert time.monotonic() < end, "no measurement within 300 s"
        time.sleep(0.3)
    assert job.status().state == "running"
    with pytest.raises(TuneError, match="already running"):
        start_job(spec, job_dir, queue=queue)
    group = [psutil.Process(job.pid), *psutil.Process(job.pid).children(recursive=True)]
    assert len(group) > 1  # TVM's build/run workers
    assert job.stop().state == "stopped"
    assert not _alive(group)
    assert Job.attach(job_dir).status().state == "stopped" and job.result() is None
    first, kept = job.progress(), _records(job_dir)
    assert 1 <= len(first) <= len(kept) < 8  # a progress line is written once its record is in the database

    job2 = start_job(spec, job_dir, queue=queue)  # same folder: resumes
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


def test_a_failing_job_reports_its_error(tmp_path, mm_task, queue):
    spec = job_spec([mm_task], {"kind": "llvm"}, 4)  # MetaSchedule needs num-cores
    job = start_job(spec, tmp_path / "job", queue=queue)
    status = job.wait(timeout=120)
    assert status.state == "failed" and "num-cores" in status.error
    assert job.result() is None


def test_a_baselines_job_replays_the_start_and_the_result_once_each(tmp_path, replays, monkeypatch):
    from workbench.engine.tuning.jobs import baselines

    start = new_session("r18_stem")
    tuned = tuned_conv(start, 0.5)
    job = job_folder(tmp_path / "job", start, "loop", rows("conv", [0.5]),
                     result={"session": tuned.session.to_json(), "network": {}})
    timed = []
    monkeypatch.setattr(baselines, "measure_baselines", lambda a, b: timed.append((a, b)) or [])
    (job.dir / "baselines").mkdir()
    (job.dir / "baselines" / "spec.json").write_text(json.dumps(baselines_job_spec(job)))
    replays.clear()
    run_job(job.dir / "baselines")
    assert sorted(replays) == sorted([start.key(), tuned.session.key()])
    ((a, b),) = timed
    assert (a.session.key(), b.session.key()) == (start.key(), tuned.session.key())
    assert json.loads((job.dir / "baselines" / "result.json").read_text())["baselines"] == []


def test_a_session_job_with_baselines_replays_its_session_once(tmp_path, replays, monkeypatch):
    """The tuning's own replay of the start serves the baselines too: they time the states it
    ended with, not new replays of the start and of the result."""
    from workbench.engine.tuning.jobs import baselines

    start = new_session("gmm", m=64, n=64, k=64)
    (tmp_path / "job").mkdir()
    spec = session_job_spec(start, "loop", 2, TuneOptions(keep_faster=False), baselines=True)
    (tmp_path / "job" / "spec.json").write_text(json.dumps(spec))
    timed = []
    monkeypatch.setattr(baselines, "measure_baselines", lambda a, b: timed.append((a, b)) or [])
    replays.clear()
    run_job(tmp_path / "job")
    assert replays == [start.key()]
    result = json.loads((tmp_path / "job" / "result.json").read_text())
    ((a, b),) = timed
    assert a.session.key() == start.key() and json.loads(json.dumps(b.session.to_json())) == result["session"]
    assert result["baselines"] == [] and b.kernel_schedule("gmm").kind == "tuned"
