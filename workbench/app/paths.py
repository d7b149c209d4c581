"""Where the app keeps its files: session files (``ALT_WORKBENCH_SESSIONS``, default ``sessions/``)
and its work folder (``ALT_WORKBENCH_WORK``, default ``work/``: autosaves, tuning, replays, caches).
Apart from ``state`` so that the entry script can read them before the engine is imported."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "SESSIONS_DIR", "WORK_DIR"]

ROOT = Path(__file__).resolve().parents[2]
SESSIONS_DIR = Path(os.environ.get("ALT_WORKBENCH_SESSIONS", ROOT / "sessions"))
WORK_DIR = Path(os.environ.get("ALT_WORKBENCH_WORK", ROOT / "work"))
