"""What a page shows of errors and notes: one line each, never a traceback. ``failure`` words an
error (what failed, the error's first line, what to do; an unexpected error's traceback goes to
the server's log), ``guard`` draws a part of a page under it, ``attempt`` runs a button's work
under it, and ``show_messages`` shows the last action's note or refusal once."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import streamlit as st

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.models.frontend import first_line

__all__ = ["failure", "guard", "attempt", "show_messages"]

_LOG = logging.getLogger("workbench")


def failure(e: Exception, what: str = "", todo: str = "") -> str:
    """One line for an error: ``what`` failed, the error's first line, and what to do. An error
    other than a ``WorkbenchError`` (a bug, or TVM's or torch's own) is named by its type, and
    its traceback goes to the server's log."""
    if isinstance(e, WorkbenchError):  # ours: the whole message, which says what was wrong
        msg = " ".join(line.strip() for line in str(e).splitlines() if line.strip())
    else:
        _LOG.error("%s failed", what or "an action", exc_info=e)
        msg = f"{type(e).__name__}: {first_line(e)}"
        todo = todo or "nothing was changed; try again, or reload the page (the tab's work is kept)"
    if what and not msg.startswith(f"{what}: "):  # a message that names its subject already is not prefixed twice
        msg = f"{what}: {msg}"
    return f"{msg}; {todo}" if todo else msg


@contextlib.contextmanager
def guard(what: str) -> Iterator[None]:
    """Draw a part of the page (``what``: "the Graph page"): an error it raises shows in one line
    where it happened, not as a traceback."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - st.rerun and st.stop are BaseExceptions and pass
        st.error(failure(e, f"{what} failed", "reload the page to try again (the tab's work is kept)"),
                 icon=":material/error:")


@contextlib.contextmanager
def attempt(prefix: str = "", rerun: bool = True) -> Iterator[None]:
    """Run a button's work: an error it raises is shown at the top of the page in one line (after
    ``prefix``) and changes nothing; then the script reruns to draw the result."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - see guard
        st.session_state.error = failure(e, prefix.removesuffix(": "))
    if rerun:
        st.rerun()


def show_messages() -> None:
    """The last action's note or refusal, once (they survive the rerun that follows a button)."""
    if msg := st.session_state.pop("error", None):
        st.error(msg, icon=":material/block:")
    if note := st.session_state.pop("note", None):
        st.success(note, icon=":material/check:")
