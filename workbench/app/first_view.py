"""A new tab's first view, drawn before the engine is imported: on a fresh server TVM and PyTorch
take seconds to import, and the tab would stay blank meanwhile.

The Graph page remembers what it drew for a new tab (title, caption, the graph as static SVG) in
``WORK_DIR/cache/first_view.json``, under a key of the package's source and Streamlit's release;
the entry script shows it (``show``) while the engine imports, and the page takes it away
(``take_away``) as it starts to draw the same things live. Nothing here imports the engine,
Plotly or pandas: this module is what the entry script runs before them.
``python -m workbench.app.first_view`` (``make``'s install step) draws the page once to remember it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

import streamlit as st

from workbench.app import paths

__all__ = ["ENGINE_READY", "TAB_STARTED", "page_of", "prepare", "remember", "show", "take_away", "view_key"]

#: set once the engine has been imported in this process (by the entry script or the server's
#: warm-up): the first view is then not needed, the page draws as fast
ENGINE_READY = threading.Event()
#: set once a tab's run has drawn its first view (or found it not needed): the server's warm-up
#: waits for it a moment, so as not to compete with the view
TAB_STARTED = threading.Event()
PACKAGE = Path(__file__).resolve().parents[1]
_SLOT = "first_view_slot"  # the tab's drawn view, in st.session_state


@lru_cache(maxsize=1)
def view_key() -> str:
    """A hash of every module of the package and of the pinned requirements: a remembered view
    is shown only by the code (and TVM, Streamlit...) that drew it (computed once per process)."""
    h = hashlib.sha1()
    for path in sorted([*PACKAGE.rglob("*.py"), paths.ROOT / "requirements.txt"]):
        if path.is_file():  # not an editor's dangling lock link
            h.update(str(path.relative_to(paths.ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _path() -> Path:
    return paths.WORK_DIR / "cache" / "first_view.json"


def remember(title: str, caption: str, svg: str) -> None:
    """Keep what the Graph page drew for a new tab (once per key: the file is rewritten only
    when the code changed). A failure to write is no error: the next tab just waits for the engine."""
    try:
        if _remembered():
            return
        _store(json.dumps({"key": view_key(), "title": title, "caption": caption, "svg": svg}))
    except OSError:
        pass


def _store(text: str) -> None:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as f:
        try:
            f.write(text)
        except OSError:
            os.unlink(f.name)
            raise
    os.replace(f.name, path)


def page_of(url: str | None) -> str:
    """The page a URL opens: the last part of its path ("" for the default page).

    >>> page_of("http://localhost:8501/"), page_of("https://host/wb/profile"), page_of(None)
    ('', 'profile', '')
    """
    return urlparse(url or "").path.strip("/").rsplit("/", 1)[-1]


def _wanted() -> bool:
    """A new tab (no workspace id in its URL) on the Graph page, while the engine still imports."""
    if ENGINE_READY.is_set() or st.query_params.get("ws"):
        return False
    return page_of(st.context.url) in ("", "graph")


def show() -> bool:
    """Draw the remembered first view when it applies (see ``_wanted``) and is of this code;
    ``take_away`` removes it. Any failure here draws nothing: the view only saves waiting."""
    try:
        if not _wanted():
            return False
        view = json.loads(_path().read_text())
        if not isinstance(view, dict) or view.get("key") != view_key():
            return False
        title, caption, svg = str(view["title"]), str(view["caption"]), str(view["svg"])
    except Exception:  # noqa: BLE001 - see above
        return False
    slot = st.empty()
    with slot.container(key="first_view"):
        st.title(title)
        st.caption(caption)
        st.markdown(f'<div class="graph-preview">{svg}</div>', unsafe_allow_html=True)
    st.session_state[_SLOT] = slot
    return True


def take_away() -> None:
    """Remove this tab's first view, if one is drawn: the Graph page does so just before it
    draws the same things live, so the page takes the view's place."""
    slot = st.session_state.pop(_SLOT, None)
    if slot is not None:
        slot.empty()


def prepare() -> bool:
    """Run the app headless once (Streamlit's ``AppTest``), in a scratch work folder, so that the
    Graph page remembers its view for this code; keep only that. Returns whether it did. Meant
    for a process of its own: the app's modules keep the scratch folder."""
    from streamlit.testing.v1 import AppTest

    if _remembered():
        return True
    real = paths.WORK_DIR
    with tempfile.TemporaryDirectory() as scratch:
        paths.WORK_DIR = Path(scratch)  # the run's autosaved workspace is a throwaway
        try:
            AppTest.from_file(str(Path(__file__).with_name("main.py")), default_timeout=300).run()
            view = _path().read_text() if _remembered() else None
        finally:
            paths.WORK_DIR = real
    if view is not None:
        _store(view)
    return view is not None


def _remembered() -> bool:
    try:
        return json.loads(_path().read_text()).get("key") == view_key()
    except (OSError, ValueError, AttributeError):
        return False


if __name__ == "__main__":
    print("first view of a new tab:", "remembered" if prepare() else "not remembered (the first tab waits)")
