"""A job's folder, and the atomic JSON files and ``flock`` locks it is made of::

    job_dir/spec.json        what to do (``spec``)
    job_dir/queue.json       its place in the queue: folder, ticket, limit, owner
    job_dir/slot.json        written when the job leaves the queue and starts its work
    job_dir/progress.jsonl   one line per measurement (``progress``), appended live
    job_dir/work/            the MetaSchedule JSONDatabase (resumable)
    job_dir/out/             a replay's kernels.so, program.py and report.json
    job_dir/result.json      the TuneResults, the tuned session or the replay report, at the end
    job_dir/error.json       the error, when it fails
    job_dir/stdout.log, stderr.log, pid.json, tmp/ (the worker's TMPDIR)
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["write_json", "read_json", "tail", "lock", "held", "write_fd"]


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` atomically (a reader sees the old file or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def tail(path: Path, lines: int = 12) -> str:
    """The last ``lines`` lines of a log ("" when unreadable)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def lock(path: Path) -> int | None:
    """``path`` opened and exclusively flock-ed (the descriptor), or None when a live process
    holds it. The lock lasts as long as some process keeps the open file."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def held(path: Path) -> bool:
    """Whether a live process holds ``path``'s lock (a missing file is not held)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # dropped again by the close below
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def write_fd(fd: int, obj: Any) -> None:
    """Replace the content of the open (locked) file ``fd`` with ``obj`` as JSON."""
    data = json.dumps(obj).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)

