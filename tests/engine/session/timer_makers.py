"""Timer makers for ``network_time``'s tests, made in its timing sidecar: module level in an
importable module, so that they pickle."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.engine.base.interleave import Timer, call_timer


def pid_timer(path: str, error: float = 0.0) -> Timer:
    """A timer of a trivial call; its maker writes the process id it runs in to ``path``; its
    label is ``error``, the outputs' relative error a framework's maker would put there."""
    Path(path).write_text(str(os.getpid()))
    timer = call_timer(lambda: sum(range(100)), min_ms=1.0)
    timer.label = repr(error)  # type: ignore[attr-defined]
    return timer


def failing_timer() -> Timer:
    raise RuntimeError("no such provider\nmore")


def dying_timer() -> Timer:
    os._exit(3)  # a framework that crashes its process
