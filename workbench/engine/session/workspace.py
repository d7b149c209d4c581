"""A browser tab's work, kept across page reloads and server restarts: the session (with its redo
stack) and the tab's data (measurements, its jobs, kept choices), autosaved atomically as one
JSON file per workspace id.

The app gives each tab a random id (in the page URL); a reload with the same id restores the
session and its data. The data are plain JSON: the engine does not interpret them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.errors import SessionError, WorkbenchError
from ..base.files import write_atomic
from .session import Session, State, parse, replay
from ..base.step import Step

__all__ = ["Workspace", "new_workspace_id", "save_workspace", "load_workspace"]

_ID = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class Workspace:
    """A restored workspace: the replayed state and the tab's measurement data."""

    state: State
    data: dict[str, Any] = field(default_factory=dict)


def new_workspace_id() -> str:
    return secrets.token_hex(8)


def _path(folder: str | os.PathLike, wid: str) -> Path:
    if not _ID.match(wid):
        raise SessionError(f"invalid workspace id {wid!r}")
    return Path(folder) / f"{wid}.json"


def save_workspace(folder: str | os.PathLike, wid: str, session: Session, data: dict[str, Any],
                   unless: str | None = None) -> str:
    """Write the workspace atomically (``data`` must be JSON data) and return its text; nothing
    is written when the text is ``unless`` (what the caller wrote last), so saving after every
    change of a page costs a write only when something changed."""
    doc = {"session": session.to_json(), "redo": [s.to_json() for s in session.redo_stack], "data": data}
    text = json.dumps(doc, default=_scalar) + "\n"
    if text != unless:
        write_atomic(_path(folder, wid), text)
    return text


def _scalar(x: Any) -> Any:
    """NumPy scalars in measurement rows as plain numbers."""
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"not JSON data: {type(x).__name__}")


def load_workspace(folder: str | os.PathLike, wid: str) -> Workspace | None:
    """The saved workspace (replayed once), or None when there is none or it no longer replays
    (e.g. written by another version): the tab then starts afresh rather than failing."""
    try:
        doc = json.loads(_path(folder, wid).read_text())
        session = parse(json.dumps(doc["session"]))
        redo = tuple(Step.from_json(a, i) for i, a in enumerate(doc.get("redo", [])))
        data = doc.get("data", {})
        if not isinstance(data, dict):
            return None
        return Workspace(replay(replace(session, redo_stack=redo)), data)
    except (OSError, ValueError, KeyError, TypeError, WorkbenchError):
        return None
