"""The parent's side of a job: ``start_job``, the ``Job`` handle the app and the CLI poll and
stop, and the machine-wide ``JobQueue`` that shares the CPU fairly.

The queue (one folder per work folder, shared by every app and tab on the machine) holds only
``flock`` locks, which the kernel drops when their process dies, even by SIGKILL::

    queue/waiting/TICKET.json  one per job waiting for a slot, locked by its worker; tickets sort
                               in start order, and a file nobody locks is a dead job's (removed)
    queue/slot-I.lock          locked by the worker running in slot I (I < limit)
    queue/owners/HASH.json     locked by the one live job of an owner (a browser tab); names it

``start_job`` takes the owner's lock and the ticket's lock and hands both to the worker (the
locks belong to the open file, which the worker inherits), so a tab's second job is refused
before anything starts. The worker runs in its own process group, so ``Job.stop`` ends it all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from ...base.errors import TuneError
from ..startup import REPO_ROOT, workbench_pythonpath
from .files import held, lock, read_json, tail, write_fd, write_json
from .spec import check_spec, kind_of, session_from_spec

if TYPE_CHECKING:
    from ...session.artifacts import ReplayReport
    from ..records import TuneResult

__all__ = ["JobQueue", "JobStatus", "Job", "start_job", "MAX_JOBS_ENV", "WORKER_MODULE"]

MAX_JOBS_ENV = "ALT_WORKBENCH_MAX_JOBS"  # machine-wide jobs at a time (default 1: two saturate 2 cores)
WORKER_MODULE = "workbench.engine.tuning.jobs.worker"  # what start_job runs with python -m
_POLL_S = 0.5  # how often a queued worker looks at the queue


########## The machine-wide queue ##########

@dataclass(frozen=True)
class JobQueue:
    """The queue folder that the jobs of one work folder share, and how many run at a time.

    ``JobQueue.at(work_dir)`` is the one the app uses (``work_dir/jobs``, the limit from
    ``$ALT_WORKBENCH_MAX_JOBS``, default 1). See the module docstring for its files.
    """

    folder: Path
    limit: int = 1

    @staticmethod
    def at(work_dir: str | os.PathLike | None = None) -> JobQueue:
        """The queue of ``work_dir`` (default ``$ALT_WORKBENCH_WORK``, else the repository's ``work``)."""
        work = Path(work_dir or os.environ.get("ALT_WORKBENCH_WORK") or REPO_ROOT / "work")
        text = os.environ.get(MAX_JOBS_ENV, "1")
        if not text.strip().isdigit() or int(text) < 1:
            raise TuneError(f"${MAX_JOBS_ENV} must be a positive number of jobs, got {text!r}")
        return JobQueue(work.resolve() / "jobs", int(text))

    def _dirs(self) -> tuple[Path, Path]:
        waiting, owners = self.folder / "waiting", self.folder / "owners"
        waiting.mkdir(parents=True, exist_ok=True)
        owners.mkdir(parents=True, exist_ok=True)
        return waiting, owners

    def waiting(self) -> list[str]:
        """The tickets of the live jobs waiting for a slot, first in line first (dead ones are removed)."""
        live = []
        for path in sorted(self._dirs()[0].glob("*.json")):
            if held(path):
                live.append(path.stem)
            else:  # its worker died while waiting
                path.unlink(missing_ok=True)
        return live

    def position(self, ticket: str) -> int | None:
        """1 for the next job to start, 2 for the one after, ...; None when ``ticket`` is not waiting."""
        tickets = self.waiting()
        return tickets.index(ticket) + 1 if ticket in tickets else None

    def running(self) -> int:
        """How many slots are taken now."""
        return sum(held(self.folder / f"slot-{i}.lock") for i in range(self.limit))

    def _owner_path(self, owner: str) -> Path:
        # hashed: the owner is a tab id from the URL, never trusted as a file name
        return self._dirs()[1] / f"{hashlib.sha256(owner.encode()).hexdigest()[:32]}.json"

    def job_of(self, owner: str, kind: str | None = None) -> Job | None:
        """The live (queued or running) job of ``owner``, if any, and if ``kind`` is given, only
        when it is one of that kind (``"tuning"`` or ``"replay"``)."""
        path = self._owner_path(owner)
        info = read_json(path)
        if not held(path) or not isinstance(info, dict) or "dir" not in info:
            return None
        job = Job.attach(Path(info["dir"]))
        return job if job is not None and (kind is None or job.kind == kind) else None

    ########## Taking places (start_job and the worker) ##########

    def _claim_owner(self, owner: str, job_dir: Path, kind: str) -> int:
        """Lock ``owner``'s file for a new job; refused while the owner has a live job."""
        fd = lock(self._owner_path(owner))
        if fd is None:
            other = self.job_of(owner)
            what = f"a {other.kind} job ({other.status()})" if other is not None else "a job"
            raise TuneError(f"this tab already has {what}: one job per tab; stop it or wait for it to finish")
        write_fd(fd, {"dir": str(job_dir), "kind": kind, "since": time.time()})
        return fd

    def _enqueue(self, ticket: str, job_dir: Path) -> int:
        """Create the locked entry of ``ticket``; visible only once locked (renamed into place), so
        nobody mistakes it for a dead job's."""
        waiting = self._dirs()[0]
        tmp = waiting / f".{ticket}.tmp"
        fd = lock(tmp)
        if fd is None:
            raise TuneError(f"the queue entry {tmp} is locked by another process")
        write_fd(fd, {"dir": str(job_dir)})
        os.rename(tmp, waiting / f"{ticket}.json")
        return fd

    def take_slot(self, ticket: str, job_dir: Path) -> int:
        """Wait until ``ticket`` is first in line and a slot is free; take it (the worker holds the
        returned descriptor until it exits) and leave the line."""
        while True:
            tickets = self.waiting()
            if ticket not in tickets or tickets[0] == ticket:  # first in line (or its entry is gone: no hanging)
                for i in range(self.limit):
                    fd = lock(self.folder / f"slot-{i}.lock")
                    if fd is not None:
                        write_json(job_dir / "slot.json", {"slot": i, "pid": os.getpid(), "since": time.time()})
                        (self.folder / "waiting" / f"{ticket}.json").unlink(missing_ok=True)
                        return fd
            time.sleep(_POLL_S)



########## A job's handle ##########

@dataclass(frozen=True)
class JobStatus:
    """``state`` is one of queued, running, done, failed, stopped; ``error`` is the failure's
    tail; ``position`` is a queued job's place in line (1: next to start)."""

    state: str
    error: str | None = None
    position: int | None = None

    def __str__(self) -> str:
        if self.state == "queued":
            return f"queued, #{self.position} in line" if self.position else "queued"
        return f"{self.state}: {self.error}" if self.error else self.state


class Job:
    """A job running (or queued, or finished) in ``job_dir``; ``Job.attach`` finds it again later."""

    def __init__(self, job_dir: Path, pid: int, started: float, proc: subprocess.Popen | None = None) -> None:
        self.dir, self.pid, self.started, self._proc = Path(job_dir), pid, started, proc

    def __repr__(self) -> str:
        return f"Job({str(self.dir)!r}, pid={self.pid}, {self.status()})"

    @staticmethod
    def attach(job_dir: Path) -> "Job | None":
        """The job last started in ``job_dir`` (running or not), or None if there never was one."""
        info = read_json(Path(job_dir) / "pid.json")
        if not isinstance(info, dict) or "pid" not in info:
            return None
        return Job(Path(job_dir), int(info["pid"]), float(info.get("started", 0.0)))

    @property
    def owner(self) -> str | None:
        """The browser tab (workspace id) the job belongs to; None for a job started by a script."""
        q = read_json(self.dir / "queue.json")
        return q.get("owner") if isinstance(q, dict) else None

    @property
    def kind(self) -> str:
        """``"tuning"`` or ``"replay"``."""
        return kind_of(read_json(self.dir / "spec.json"))

    @property
    def budget(self) -> int | None:
        """The measurements a tuning job was given (None for a replay job or an unreadable spec)."""
        spec = read_json(self.dir / "spec.json")
        budget = spec.get("budget") if isinstance(spec, dict) else None
        return int(budget) if isinstance(budget, int) else None

    @property
    def stage(self) -> str | None:
        """A session tuning job's stage (``joint`` or ``loop``; None for another job)."""
        spec = read_json(self.dir / "spec.json")
        return spec.get("stage") if isinstance(spec, dict) and spec.get("kind") == "session" else None

    def _check_owner(self, owner: str | None, what: str) -> None:
        if self.owner is not None and owner != self.owner:
            raise TuneError(f"this {self.kind} job belongs to another tab: only that tab can {what} it")

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
        """Whether the worker is alive (queued or at work)."""
        if self._proc is not None:
            return self._proc.poll() is None
        try:
            p = psutil.Process(self.pid)
            return p.status() != psutil.STATUS_ZOMBIE and abs(p.create_time() - self.started) < 1.0
        except psutil.Error:
            return False

    def status(self) -> JobStatus:
        if self.running():
            slot = read_json(self.dir / "slot.json")
            if isinstance(slot, dict) and slot.get("pid") == self.pid:
                return JobStatus("running")
            q = read_json(self.dir / "queue.json")
            if not isinstance(q, dict):
                return JobStatus("queued")
            return JobStatus("queued", position=JobQueue(Path(q["folder"]), int(q["limit"])).position(q["ticket"]))
        if (self.dir / "stopped").exists():
            return JobStatus("stopped")
        if (self.dir / "result.json").exists():
            return JobStatus("done")
        err = read_json(self.dir / "error.json")
        if isinstance(err, dict) and err.get("error"):
            return JobStatus("failed", str(err["error"]))
        code = self._proc.returncode if self._proc is not None else None
        last = tail(self.dir / "stderr.log") or "no output"
        return JobStatus("failed", (f"exit code {code}: " if code is not None else "") + last)

    def progress(self) -> list[dict]:
        from ..progress import read_progress

        return read_progress(self.dir / "progress.jsonl")

    def result(self) -> dict[str, TuneResult] | None:
        """The results a kernel tuning job wrote when it finished (None before that)."""
        from ..records import TuneResult

        data = read_json(self.dir / "result.json")
        if not isinstance(data, dict):
            return None
        return {name: TuneResult.from_json(r) for name, r in data.get("results", {}).items()}

    def tuned_state(self, owner: str | None = None) -> Any:
        """The tuned session a session job wrote when it finished, replayed (a ``session.State``;
        None before that), for its ``owner`` only: this is what a tab applies. Replayed once per
        result and process: the page asks on every rerun."""
        self._check_owner(owner, "apply")
        data = read_json(self.dir / "result.json")
        if not isinstance(data, dict) or "session" not in data:
            return None
        return _replayed(self.dir, json.dumps(data["session"], sort_keys=True))

    def partial_result(self, owner: str | None = None) -> Any:
        """The best so far of a session job that ended without its result (a
        ``partial.PartialResult``; None for another job), for its ``owner`` only."""
        self._check_owner(owner, "apply")
        spec = read_json(self.dir / "spec.json")
        if not isinstance(spec, dict) or spec.get("kind") != "session":
            return None
        from .partial import partial_result

        return partial_result(session_from_spec(spec), spec["stage"], self.dir / "work", self.progress())

    def baselines(self) -> Any:
        """This run's tuned kernels timed against their baselines (``baselines.BaselinesReport``):
        written at a session job's end, or by a baselines job on it; None when not timed."""
        from .baselines import read_report

        return read_report(read_json(self.dir / "result.json"), read_json(self.dir / "baselines" / "result.json"),
                           self.started)

    def network_report(self) -> list[str]:
        """What a session job's ``tune_network`` said beyond its session (``NetworkTuning.summary``:
        kernels tuned again, the network kept, kernels slower than measured); empty before the end."""
        data = read_json(self.dir / "result.json")
        if not isinstance(data, dict) or not isinstance(data.get("network"), dict):
            return []
        from ..stages import summary_of

        return summary_of(data["network"])

    def replay_report(self) -> ReplayReport | None:
        """The report a replay job wrote when it finished (None before that); its files are in
        ``job.dir / "out"``."""
        from ...session.artifacts import ReplayReport

        data = read_json(self.dir / "result.json")
        if not isinstance(data, dict) or "replay" not in data:
            return None
        return ReplayReport(**data["replay"])

    def wait(self, timeout: float | None = None, poll_s: float = 0.5) -> JobStatus:
        """Wait until the job is no longer running (or ``timeout`` seconds) and return its status."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.running() and (end is None or time.monotonic() < end):
            time.sleep(poll_s)
        return self.status()

    ########## Stopping ##########

    def stop(self, grace_s: float = 5.0, owner: str | None = None) -> JobStatus:
        """SIGTERM to the job's process group, SIGKILL after ``grace_s``; returns once no process
        of the group is left (a queued job leaves the line). Completed measurements stay in the
        database and progress file. Only the job's ``owner`` may stop it."""
        self._check_owner(owner, "stop")
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
                raise TuneError(f"the {self.kind} job {self.pid} in {self.dir} did not stop")
        shutil.rmtree(self.dir / "tmp", ignore_errors=True)
        return self.status()


# (job folder, hash of its result's session) -> the tuned state: a new result in the folder replays again
_TUNED: dict[tuple[str, str], Any] = {}
_TUNED_KEPT = 8  # a state holds its kernels' TIR: keep only the latest few (about one per open tab)
_TUNED_LOCK = threading.Lock()  # the app's sessions rerun in threads of one process


def _replayed(job_dir: Path, text: str) -> Any:
    """The session file ``text`` of ``job_dir``'s result, replayed (``loads_state``) once."""
    key = (str(job_dir.resolve()), hashlib.sha256(text.encode()).hexdigest())
    with _TUNED_LOCK:
        state = _TUNED.pop(key, None)
        if state is not None:
            _TUNED[key] = state  # the most recently used last
            return state
    from ...session.session import loads_state

    state = loads_state(text)
    with _TUNED_LOCK:
        _TUNED[key] = state
        while len(_TUNED) > _TUNED_KEPT:
            _TUNED.pop(next(iter(_TUNED)))
    return state


def start_job(spec: dict, job_dir: Path, *, owner: str | None = None, queue: JobQueue | None = None) -> Job:
    """Launch ``python -m workbench.engine.tuning.jobs.worker JOB_DIR`` on ``spec`` and return at once;
    the job waits in ``queue`` (default ``JobQueue.at()``) until a slot is free.

    ``owner`` (a browser tab's workspace id) may have one live job at a time: a second is refused,
    and only the owner can stop the job or apply its result. A folder that holds an earlier job
    resumes it (its database and progress lines are kept); one whose job is alive is refused."""
    job_dir = Path(job_dir).resolve()
    job_dir.mkdir(parents=True, exist_ok=True)
    queue = queue or JobQueue.at()
    old = Job.attach(job_dir)
    if old is not None and old.running():
        raise TuneError(f"a job is already running in {job_dir} (pid {old.pid}); stop it first")
    check_spec(spec)
    kind = kind_of(spec)
    ticket = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}"  # sorts in start order
    fds: list[int] = []
    try:
        if owner is not None:
            fds.append(queue._claim_owner(owner, job_dir, kind))
        for name in ("result.json", "error.json", "stopped", "slot.json"):
            (job_dir / name).unlink(missing_ok=True)
        shutil.rmtree(job_dir / "tmp", ignore_errors=True)
        (job_dir / "tmp").mkdir()
        write_json(job_dir / "spec.json", spec)
        write_json(job_dir / "queue.json", {"folder": str(queue.folder), "limit": queue.limit, "ticket": ticket,
                                             "owner": owner})
        fds.append(queue._enqueue(ticket, job_dir))
        env = {**os.environ, "TMPDIR": str(job_dir / "tmp"), "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": workbench_pythonpath(os.environ.get("PYTHONPATH"))}
        with open(job_dir / "stdout.log", "ab") as out, open(job_dir / "stderr.log", "ab") as err:
            # the worker inherits the locked files: its locks now live exactly as long as it does
            proc = subprocess.Popen([sys.executable, "-m", WORKER_MODULE, str(job_dir)], cwd=job_dir, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                                    pass_fds=tuple(fds))
    finally:
        for fd in fds:
            os.close(fd)
    try:
        started = psutil.Process(proc.pid).create_time()
    except psutil.Error:  # already gone: status() reports why
        started = time.time()
    write_json(job_dir / "pid.json", {"pid": proc.pid, "started": started})
    return Job(job_dir, proc.pid, started, proc)

