"""The ``at`` fixture: the app on the default model, its files in a temporary folder."""

import sys

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import start


@pytest.fixture
def at(tmp_path, monkeypatch) -> AppTest:
    from workbench.app import paths, state as _state

    for module in (paths, _state):  # the entry script reads paths before it imports state
        monkeypatch.setattr(module, "SESSIONS_DIR", tmp_path / "sessions")
        monkeypatch.setattr(module, "WORK_DIR", tmp_path / "work")
    return start()


@pytest.fixture(autouse=True)
def _main_module_kept():
    """AppTest runs the app as ``__main__`` and leaves it there: a process spawned later in the
    same pytest run (a benchmark's timing sidecar) would then run the app script on start."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main
