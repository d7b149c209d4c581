"""Tuning in a separate process, so the app and the CLI can watch it and stop it.

A job lives in one folder::

    job_dir/spec.json        what to tune: kernels (``job_spec``: tasks as TVM JSON, target, budget,
                             stage, rpc, ...) or a whole session (``session_job_spec``: the joint or
                             loop stage of ``tune.tune_session``, whose result is the tuned session)
    job_dir/progress.jsonl   one line per measurement (see ``metaschedule``), appended live
    job_dir/work/            the MetaSchedule JSONDatabase (resumable)
    job_dir/result.json      the TuneResults (or the tuned session), written when the job finishes
    job_dir/error.json       the error, when it fails
    job_dir/stdout.log, stderr.log, pid.json, tmp/ (the worker's TMPDIR)

``start_job`` launches ``python -m workbench.engine.worker JOB_DIR`` in a new session (its own
process group, which holds TVM's build and run workers too), so ``Job.stop`` can end all of them.
A job stopped or killed mid-run loses no completed measurement; a new job on the same folder
resumes from the database.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import psutil

from .errors import TuneError, WorkbenchError
from .metaschedule import RpcConfig, TuneResult, TuneTask, read_progress, tune_loops

__all__ = ["JobStatus", "Job", "job_spec", "session_job_spec", "tasks_from_spec", "start_job", "run_job", "main"]

SPEC_FORMAT = "alt-workbench-tune-job"
_STATES = ("running", "done", "failed", "stopped")


########## Job spec ##########

def job_spec(tasks: Sequence[TuneTask], target: dict, budget: int, *, stage: str = "loop",
             rpc: RpcConfig | str | None = None, num_trials_per_iter: int = 8, layout_label: str | None = None,
             seed: int | None = None, isolated: bool = True) -> dict:
    """A JSON-able description of a tuning job (the arguments of ``tune_loops``)."""
    import tvm

    return {"format": SPEC_FORMAT, "version": 1,
            "tasks": [{"name": t.name, "func": tvm.ir.save_json(t.func), "flops": int(t.flops)} for t in tasks],
            "target": dict(target), "budget": int(budget), "stage": stage,
            "rpc": None if rpc is None else str(rpc), "num_trials_per_iter": int(num_trials_per_iter),
            "layout_label": layout_label, "seed": seed, "isolated": bool(isolated)}


def session_job_spec(session: Any, stage: str, budget: int, *, rpc: RpcConfig | str | None = None,
                     joint_fraction: float = 0.3, search: str = "model", seed: int = 0) -> dict:
    """A job that runs ``tune.tune_session`` on ``session`` (a ``session.Session``)."""
    from .tune import STAGES

    if stage not in STAGES:
        raise TuneError(f"stage must be one of {STAGES}, got {stage!r}")
    if int(budget) < 1:
        raise TuneError(f"budget must be a positive number of measurements, got {budget}")
    if not 0.0 < float(joint_fraction) < 1.0:
        raise TuneError(f"the joint stage's share of the budget must lie strictly between 0 and 1, got {joint_fraction}")
    return {"format": SPEC_FORMAT, "version": 1, "kind": "session", "session": session.to_json(), "stage": stage,
            "budget": int(budget), "rpc": None if rpc is None else str(rpc), "joint_fraction": float(joint_fraction),
            "search": search, "seed": int(seed)}


def _session_from_spec(spec: dict) -> Any:
    from .session import loads

    return loads(json.dumps(spec.get("session")))


def tasks_from_spec(spec: dict) -> list[TuneTask]:
    """The spec's tasks with their PrimFuncs loaded back."""
    import tvm

    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        raise TuneError(f"not a tuning job spec (format must be {SPEC_FORMAT!r})")
    for key in ("tasks", "target", "budget"):
        if key not in spec:
            raise TuneError(f"the tuning job spec has no {key!r}")
    tasks = []
    for i, t in enumerate(spec["tasks"]):
        try:
            func = tvm.ir.load_json(t["func"])
            tasks.append(TuneTask(t["name"], func, int(t["flops"])))
        except WorkbenchError:
            raise
        except Exception as e:
            raise TuneError(f"task {i} of the job spec cannot be loaded: {type(e).__name__}: {e}") from None
    return tasks


def _rpc(spec: dict) -> RpcConfig | None:
    return RpcConfig.parse(spec["rpc"]) if spec.get("rpc") else None


########## The parent side ##########

@dataclass(frozen=True)
class JobStatus:
    """``state`` is one of running, done, failed, stopped; ``error`` is the failure's tail."""

    state: str
    error: str | None = None

    def __str__(self) -> str:
        return f"{self.state}: {self.error}" if self.error else self.state


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


class Job:
    """A tuning job running (or finished) in ``job_dir``; ``Job.attach`` finds it again later."""

    def __init__(self, job_dir: Path, pid: int, started: float, proc: subprocess.Popen | None = None) -> None:
        self.dir, self.pid, self.started, self._proc = Path(job_dir), pid, started, proc

    def __repr__(self) -> str:
        return f"Job({str(self.dir)!r}, pid={self.pid}, {self.status()})"

    @staticmethod
    def attach(job_dir: Path) -> "Job | None":
        """The job last started in ``job_dir`` (running or not), or None if there never was one."""
        info = _read_json(Path(job_dir) / "pid.json")
        if not isinstance(info, dict) or "pid" not in info:
            return None
        return Job(Path(job_dir), int(info["pid"]), float(info.get("started", 0.0)))

    ########## Watching ##########

    def _members(self) -> list[psutil.Process]:
        """The live processes of the job's process group (the worker and TVM's workers).
        A zombie counts as gone, except our own child before ``poll`` reaps it (a process whose
        main thread has exited shows as a zombie until its other threads are done)."""
        leader_alive = self._proc is not None and self._proc.poll() is None
        out = []
        for p in psutil.process_iter(["pid", "status", "create_time"]):
            try:
                if os.getpgid(p.pid) != self.pid or p.info["create_time"] < self.started - 1.0:
                    continue
                if p.info["status"] != psutil.STATUS_ZOMBIE or (leader_alive and p.pid == self.pid):
                    out.append(p)
            except (ProcessLookupError, psutil.Error):
                continue
        return out

    def running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        try:
            p = psutil.Process(self.pid)
            return p.status() != psutil.STATUS_ZOMBIE and abs(p.create_time() - self.started) < 1.0
        except psutil.Error:
            return False

    def status(self) -> JobStatus:
        if self.running():
            return JobStatus("running")
        if (self.dir / "stopped").exists():
            return JobStatus("stopped")
        if (self.dir / "result.json").exists():
            return JobStatus("done")
        err = _read_json(self.dir / "error.json")
        if isinstance(err, dict) and err.get("error"):
            return JobStatus("failed", str(err["error"]))
        code = self._proc.returncode if self._proc is not None else None
        tail = _tail(self.dir / "stderr.log") or "no output"
        return JobStatus("failed", (f"exit code {code}: " if code is not None else "") + tail)

    def progress(self) -> list[dict]:
        return read_progress(self.dir / "progress.jsonl")

    def result(self) -> dict[str, TuneResult] | None:
        """The results the worker wrote when it finished (None before that)."""
        data = _read_json(self.dir / "result.json")
        if not isinstance(data, dict):
            return None
        return {name: TuneResult.from_json(r) for name, r in data.get("results", {}).items()}

    def tuned_session(self) -> Any:
        """The tuned ``Session`` a session job wrote when it finished (None before that)."""
        data = _read_json(self.dir / "result.json")
        if not isinstance(data, dict) or "session" not in data:
            return None
        from .session import loads

        return loads(json.dumps(data["session"]))

    def wait(self, timeout: float | None = None, poll_s: float = 0.5) -> JobStatus:
        """Wait until the job is no longer running (or ``timeout`` seconds) and return its status."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.running() and (end is None or time.monotonic() < end):
            time.sleep(poll_s)
        return self.status()

    ########## Stopping ##########

    def stop(self, grace_s: float = 5.0) -> JobStatus:
        """SIGTERM to the job's process group, SIGKILL after ``grace_s``; returns once no process
        of the group is left. Completed measurements stay in the database and progress file."""
        if self._members() or self.running():
            (self.dir / "stopped").touch()
            for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(self.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
                end = time.monotonic() + wait_s
                while (left := self._members()) and time.monotonic() < end:
                    time.sleep(0.1)
                if not left:
                    break
            else:
                raise TuneError(f"the tuning job {self.pid} in {self.dir} did not stop")
        shutil.rmtree(self.dir / "tmp", ignore_errors=True)
        return self.status()


def start_job(spec: dict, job_dir: Path) -> Job:
    """Launch ``python -m workbench.engine.worker JOB_DIR`` on ``spec`` and return at once.

    A folder that holds an earlier job resumes it (its database and progress lines are kept);
    one whose job is still running is refused."""
    job_dir = Path(job_dir).resolve()
    job_dir.mkdir(parents=True, exist_ok=True)
    old = Job.attach(job_dir)
    if old is not None and old.running():
        raise TuneError(f"a tuning job is already running in {job_dir} (pid {old.pid}); stop it first")
    if spec.get("kind") == "session":  # refuse a bad spec here, not in the worker's log
        _session_from_spec(spec)
    else:
        tasks_from_spec(spec)
    _rpc(spec)
    for name in ("result.json", "error.json", "stopped"):
        (job_dir / name).unlink(missing_ok=True)
    shutil.rmtree(job_dir / "tmp", ignore_errors=True)
    (job_dir / "tmp").mkdir()
    _write_json(job_dir / "spec.json", spec)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "TMPDIR": str(job_dir / "tmp"), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    with open(job_dir / "stdout.log", "ab") as out, open(job_dir / "stderr.log", "ab") as err:
        proc = subprocess.Popen([sys.executable, "-m", "workbench.engine.worker", str(job_dir)], cwd=job_dir,
                                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    try:
        started = psutil.Process(proc.pid).create_time()
    except psutil.Error:  # already gone: status() reports why
        started = time.time()
    _write_json(job_dir / "pid.json", {"pid": proc.pid, "started": started})
    return Job(job_dir, proc.pid, started, proc)


########## The worker side ##########

def run_job(job_dir: Path) -> dict[str, TuneResult]:
    """Tune what ``job_dir/spec.json`` says and write ``result.json`` (what the worker runs)."""
    job_dir = Path(job_dir)
    spec = _read_json(job_dir / "spec.json")
    if spec is None:
        raise TuneError(f"{job_dir / 'spec.json'} is missing or not JSON")
    if spec.get("kind") == "session":
        from .tune import tune_session

        tuned = tune_session(_session_from_spec(spec), spec["stage"], int(spec["budget"]), job_dir / "work",
                             rpc=_rpc(spec), progress_path=job_dir / "progress.jsonl",
                             joint_fraction=float(spec.get("joint_fraction", 0.3)),
                             search=spec.get("search", "model"), seed=int(spec.get("seed", 0)))
        _write_json(job_dir / "result.json", {"session": tuned.to_json(), "finished": time.time()})
        return {}
    results = tune_loops(tasks_from_spec(spec), spec["target"], job_dir / "work", int(spec["budget"]),
                         stage=spec.get("stage", "loop"), progress_path=job_dir / "progress.jsonl", rpc=_rpc(spec),
                         num_trials_per_iter=int(spec.get("num_trials_per_iter", 8)),
                         layout_label=spec.get("layout_label"), seed=spec.get("seed"),
                         isolated=bool(spec.get("isolated", True)))
    _write_json(job_dir / "result.json", {"results": {k: r.to_json() for k, r in results.items()},
                                          "finished": time.time()})
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m workbench.engine.worker JOB_DIR", file=sys.stderr)
        return 2
    try:
        run_job(Path(args[0]))
    except Exception as e:  # noqa: BLE001 (reported to the parent through error.json)
        msg = str(e) if isinstance(e, WorkbenchError) else f"{type(e).__name__}: {e}"
        _write_json(Path(args[0]) / "error.json", {"error": msg, "traceback": traceback.format_exc()})
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
