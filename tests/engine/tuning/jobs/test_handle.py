"""A job's handle and the machine-wide queue: a limit, places in line, dead workers freeing
theirs, one job per owner (who alone stops or applies it), and a result replayed once."""

import fcntl
import json
import os
import signal
import time
from pathlib import Path

import pytest

from workbench.engine.base.errors import TuneError
from workbench.engine.session.session import load, new_session
from workbench.engine.tuning.jobs.handle import Job, JobQueue, JobStatus, start_job
from workbench.engine.tuning.jobs.spec import replay_job_spec

from tests.engine.tuning.job_helpers import job_folder, rows, tuned_conv

C1D = Path(__file__).resolve().parents[4] / "sessions" / "c1d.json"  # a replay of a few seconds


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


def test_a_worker_that_died_without_a_word_fails_with_its_last_log_lines(tmp_path):
    job = job_folder(tmp_path / "job", new_session("r18_stem"), "loop", [])
    assert job.status() == JobStatus("failed", "no output")
    (job.dir / "stderr.log").write_text("".join(f"line {i}\n" for i in range(20)) + "Killed\n")
    status = Job.attach(job.dir).status()
    assert status.state == "failed" and status.error.endswith("line 19\nKilled") and "line 8\n" not in status.error


def test_a_result_is_replayed_once_until_a_new_one_replaces_it(tmp_path, replays):
    start = new_session("r18_stem")
    tuned = tuned_conv(start, 0.5)
    job = job_folder(tmp_path / "job", start, "loop", rows("conv", [0.5]), owner="tab",
                     result={"session": tuned.session.to_json(), "network": {}})
    replays.clear()
    first = job.tuned_state("tab")
    again = Job.attach(job.dir).tuned_state("tab")  # the page's next rerun attaches to the job anew
    assert first is again and first.session.key() == tuned.session.key() and replays == [tuned.session.key()]
    newer = tuned_conv(start, 0.4)  # a new run in the same folder
    (job.dir / "result.json").write_text(json.dumps({"session": newer.session.to_json(), "network": {}}))
    replays.clear()
    assert job.tuned_state("tab").session.key() == newer.session.key() and replays == [newer.session.key()]
