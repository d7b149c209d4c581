"""The job worker process: start, watch, stop (nothing left over), resume, failure reports; the
machine-wide queue (a limit, places in line, dead workers freeing theirs) and one job per owner."""

import fcntl
import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest
import tvm

from workbench.engine.base.errors import TuneError
from workbench.engine.build.targets import DEFAULT_TARGET as TARGET
from workbench.engine.base.step import Step
from workbench.engine.session.session import load, new_session, replay
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.rpc import RpcConfig
from workbench.engine.tuning.jobs.worker import (Job, JobQueue, baselines_job_spec, job_spec, replay_job_spec, run_job,
                                                 session_job_spec, start_job, tasks_from_spec)

from tests.engine.tuning.job_helpers import job_folder, rows

C1D = Path(__file__).resolve().parents[4] / "sessions" / "c1d.json"  # a replay of a few seconds


@pytest.fixture
def queue(tmp_path) -> JobQueue:
    """A queue of this test's own: jobs of other tests or of a running app never delay it."""
    return JobQueue(tmp_path / "jobs", limit=1)


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


########## The queue and the owners ##########

def _until(check, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"not {what} within {timeout} s"
        time.sleep(0.2)


def _slot_since(job: Job) -> float:
    return json.loads((job.dir / "slot.json").read_text())["since"]


def _finished(job: Job) -> float:
    return json.loads((job.dir / "result.json").read_text())["finished"]


def test_the_limit_queues_jobs_in_order_and_a_killed_worker_frees_its_place(tmp_path, queue):
    """Limit 1: B waits for A, a queued worker killed leaves the line, a running one killed (SIGKILL)
    frees the slot and its owner's turn."""
    spec = replay_job_spec(load(C1D))
    a, b, c = (start_job(spec, tmp_path / n, owner=n, queue=queue) for n in "abc")
    _until(lambda: a.status().state == "running", "running")
    assert (b.status().position, c.status().position) == (1, 2) and str(c.status()) == "queued, #2 in line"
    os.kill(b.pid, signal.SIGKILL)  # dies while waiting: its place goes to C
    _until(lambda: c.status().position == 1, "moved up")
    assert a.wait(timeout=120).state == "done", a.status()
    assert a.replay_report().ok and (a.dir / "out" / "kernels.so").exists()
    _until(lambda: c.status().state == "running", "started after A")
    assert _slot_since(c) >= _finished(a) and queue.running() == 1
    os.killpg(c.pid, signal.SIGKILL)  # killed mid-run: the kernel drops its locks
    _until(lambda: not c.running(), "dead")
    d = start_job(spec, tmp_path / "d", owner="c", queue=queue)  # C's owner may start again
    _until(lambda: d.status().state == "running", "running in the freed slot", timeout=30)
    assert d.stop(owner="c").state == "stopped" and queue.waiting() == [] and queue.running() == 0


def test_one_job_per_owner_and_only_the_owner_stops_or_applies_it(tmp_path, queue):
    queue.folder.mkdir(parents=True)
    with open(queue.folder / "slot-0.lock", "w") as busy:  # the machine is busy: jobs stay queued
        fcntl.flock(busy, fcntl.LOCK_EX)
        spec = replay_job_spec(load(C1D))
        job = start_job(spec, tmp_path / "one", owner="tab1", queue=queue)
        with pytest.raises(TuneError, match="this tab already has a replay job .*one job per tab"):
            start_job(spec, tmp_path / "two", owner="tab1", queue=queue)
        assert not (tmp_path / "two" / "spec.json").exists()  # refused before anything was written
        other = start_job(spec, tmp_path / "other", owner="tab2", queue=queue)  # another tab: in line
        assert (job.status().position, other.status().position) == (1, 2)
        assert queue.job_of("tab1").dir == job.dir and queue.job_of("tab1", "tuning") is None
        with pytest.raises(TuneError, match="belongs to another tab: only that tab can stop it"):
            Job.attach(job.dir).stop(owner="tab2")
        with pytest.raises(TuneError, match="only that tab can apply it"):
            job.tuned_state(owner="tab2")
        assert job.running() and job.stop(owner="tab1").state == "stopped"
        assert other.stop(owner="tab2").state == "stopped"
        assert queue.job_of("tab1") is None and queue.waiting() == []
        again = start_job(spec, tmp_path / "two", owner="tab1", queue=queue)  # its job is gone: allowed
        assert again.stop(owner="tab1").state == "stopped"


def test_the_job_limit_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ALT_WORKBENCH_MAX_JOBS", "3")
    assert JobQueue.at(tmp_path) == JobQueue((tmp_path / "jobs").resolve(), 3)
    monkeypatch.setenv("ALT_WORKBENCH_MAX_JOBS", "0")
    with pytest.raises(TuneError, match="ALT_WORKBENCH_MAX_JOBS must be a positive number"):
        JobQueue.at(tmp_path)


########## Replays: once per result ##########

@pytest.fixture
def replays(monkeypatch) -> list[str]:
    """The sessions replayed from here on (their keys), counted at ``session.replay``."""
    from workbench.engine.session import session as session_module

    real, seen = session_module.replay, []
    monkeypatch.setattr(session_module, "replay", lambda s: seen.append(s.key()) or real(s))
    return seen


def _tuned(start, latency_ms: float):
    return replay(start).push(Step.make("tuned", "conv", "tuned", stage="loop", trace=[[], []], latency_ms=latency_ms))


def test_a_result_is_replayed_once_until_a_new_one_replaces_it(tmp_path, replays):
    start = new_session("r18_stem")
    tuned = _tuned(start, 0.5)
    job = job_folder(tmp_path / "job", start, "loop", rows("conv", [0.5]), owner="tab",
                     result={"session": tuned.session.to_json(), "network": {}})
    replays.clear()
    first = job.tuned_state("tab")
    again = Job.attach(job.dir).tuned_state("tab")  # the page's next rerun attaches to the job anew
    assert first is again and first.session.key() == tuned.session.key() and replays == [tuned.session.key()]
    newer = _tuned(start, 0.4)  # a new run in the same folder
    (job.dir / "result.json").write_text(json.dumps({"session": newer.session.to_json(), "network": {}}))
    replays.clear()
    assert job.tuned_state("tab").session.key() == newer.session.key() and replays == [newer.session.key()]


def test_a_baselines_job_replays_the_start_and_the_result_once_each(tmp_path, replays, monkeypatch):
    from workbench.engine.tuning.jobs import baselines

    start = new_session("r18_stem")
    tuned = _tuned(start, 0.5)
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
