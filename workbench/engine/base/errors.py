"""One exception family for everything a user can get wrong (as TVM has ``ScheduleError``)."""

from __future__ import annotations

__all__ = ["WorkbenchError", "LayoutError", "GraphError", "LoopError", "BuildError", "SessionError", "TuneError",
           "first_line"]


class WorkbenchError(Exception):
    """A user-facing error: the message says what was wrong; nothing was changed. ``reason``
    is the message without the context callers prefixed (``action 3 (loop on 'conv'): step 0:``),
    for a page that already shows which action it checks."""

    def __init__(self, *args: object, reason: str | None = None) -> None:
        super().__init__(*args)
        self._reason = reason

    @property
    def reason(self) -> str:
        return self._reason if self._reason is not None else str(self)


class GraphError(WorkbenchError):
    """An unknown tensor or op, or an op whose inputs do not fit together."""


class LayoutError(WorkbenchError):
    """A layout primitive with arguments that do not fit the tensor's current layout."""


class LoopError(WorkbenchError):
    """A loop primitive that TVM refuses, or that names an unknown loop or block."""


class BuildError(WorkbenchError):
    """A kernel that fails to build or run."""


class SessionError(WorkbenchError):
    """A malformed session file or action."""


class TuneError(WorkbenchError):
    """A tuning job that cannot start or failed."""


class TuneWarning(UserWarning):
    """A tuning result that was not used (it gives wrong results), with what was used instead."""


def first_line(e: BaseException) -> str:
    """The first meaningful line of an exception from TVM, torch or onnx (they are long).

    >>> first_line(ValueError("  File x.py, line 3\\n\\n  shape mismatch\\n  ^^^^"))
    'shape mismatch'
    >>> first_line(KeyError())
    'KeyError'
    """
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.strip().startswith(("File ", "^"))]
    return (lines[0] if lines else type(e).__name__)[:300]
