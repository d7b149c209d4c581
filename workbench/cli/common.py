"""What the commands share: a status bar and the ``--target`` flag's JSON."""

from __future__ import annotations

import json
import sys
from typing import Callable

from tqdm import tqdm

from workbench.engine.base.errors import WorkbenchError


def status_bar(desc: str) -> tuple[tqdm, Callable[[str], None]]:
    """A status bar on stderr (shown on a terminal only): ``desc: step [elapsed]``."""
    bar = tqdm(desc=desc, bar_format="{desc}: {postfix} [{elapsed}]", file=sys.stderr, disable=None)
    return bar, lambda msg: (bar.set_postfix_str(msg), bar.refresh())


def parse_target(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        t = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkbenchError(f"--target must be a JSON object such as '{{\"kind\": \"llvm\", \"num-cores\": 2}}': {e}")
    if not isinstance(t, dict):
        raise WorkbenchError("--target must be a JSON object, e.g. '{\"kind\": \"llvm\", \"num-cores\": 2}'")
    from workbench.engine.session.session import check_target

    check_target(t)
    return t

