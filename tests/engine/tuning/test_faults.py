"""Faults: a session's joint stage killed by SIGKILL in its worker process loses no completed
measurement, and the same job started again on the same folder resumes and finishes without
measuring any layout candidate twice."""

import os
import signal
import time
from pathlib import Path

import pytest

from workbench.engine.session.session import new_session
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.jobs.worker import JobQueue, session_job_spec, start_job

BUDGET = 4  # gmm's joint share: round(4 * 0.75) = 3 candidates of one measurement each, then 1 loop-only
FRACTION = 0.75
CANDIDATES = 3


def _records(work: Path) -> dict[str, list[str]]:
    """Each joint candidate folder's database records (raw lines), by folder name."""
    out = {}
    for db in sorted(work.glob("joint/*/cand*/database_tuning_record.json")):
        out[db.parent.name] = [ln for ln in db.read_text().splitlines() if ln.strip()]
    return out


def _until(check, what: str, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"not {what} within {timeout} s"
        time.sleep(0.05)


def test_a_joint_stage_killed_with_sigkill_keeps_its_records_and_resumes(tmp_path):
    session = new_session("gmm", m=64, n=64, k=64)
    # keep_faster=False: the guard may keep the expert network over a 4-measurement tuning; this
    # test is about the records of a killed run, so it reads the tuned step itself
    spec = session_job_spec(session, "joint", BUDGET, TuneOptions(joint_fraction=FRACTION, seed=0, keep_faster=False))
    queue = JobQueue(tmp_path / "jobs", limit=1)
    job_dir = tmp_path / "job"
    job = start_job(spec, job_dir, queue=queue)
    # kill as soon as the first layout candidate is measured: the joint stage has more to go
    _until(lambda: any(r.get("stage") == "joint" for r in job.progress()) or not job.running(),
           "a joint-stage measurement", timeout=120)
    assert job.running(), job.status()
    os.killpg(job.pid, signal.SIGKILL)
    _until(lambda: not job.running(), "dead after SIGKILL", timeout=30)
    assert job.status().state == "failed" and job.tuned_state() is None

    before_rows, before = job.progress(), _records(job_dir / "work")
    joint_before = [r for r in before_rows if r["stage"] == "joint"]
    assert joint_before and all(r["stage"] == "joint" for r in before_rows)  # killed during the joint stage
    assert len(joint_before) < CANDIDATES
    assert sum(map(len, before.values())) >= len(before_rows)  # a progress line follows its record

    again = start_job(spec, job_dir, queue=queue)  # the same command on the same folder
    status = again.wait(timeout=240)
    assert status.state == "done", status
    rows, after = again.progress(), _records(job_dir / "work")
    assert rows[:len(before_rows)] == before_rows  # nothing written before the kill was lost
    for cand, recs in before.items():
        assert after[cand][:len(recs)] == recs
    # no candidate measured twice: one joint record per folder (the chosen one's loop records after
    # it), one joint line per layout; the budget counts the measurements of both runs
    chosen = [r["layout"] for r in rows if r["stage"] == "loop"]
    joint = [r["layout"] for r in rows if r["stage"] == "joint"]
    assert len(after) == CANDIDATES and len(set(joint)) == len(joint) == CANDIDATES
    assert len(chosen) == BUDGET - CANDIDATES and len(set(chosen)) == 1 and chosen[0] in joint
    chosen_dir = f"cand{joint.index(chosen[0])}"
    assert {c: len(r) for c, r in after.items()} == {
        f"cand{k}": 1 + (BUDGET - CANDIDATES) * (f"cand{k}" == chosen_dir) for k in range(CANDIDATES)}
    (step,) = again.tuned_state().session.steps
    assert step.get("measurements") == BUDGET
    assert step.get("latency_ms") == pytest.approx(min(
        r["latency_ms"] for r in rows if r["layout"] == chosen[0] and r["latency_ms"] is not None))
