"""Files written whole or not at all: what every saved thing (sessions, workspaces, uploaded
models) goes through. At the bottom of the engine's import order: it imports nothing of ours."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike, text: str | bytes) -> Path:
    """Write atomically: a temporary file in the same folder, fsync, then a rename (a failure
    leaves the old file as it was).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_atomic(folder / "a" / "b.txt", "one").read_text()
    'one'
    >>> sorted(p.name for p in (folder / "a").iterdir())  # no temporary file left beside it
    ['b.txt']
    >>> import shutil; shutil.rmtree(folder)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
