"""The ``at`` fixture: the app on the default model, its files in a temporary folder."""

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import start


@pytest.fixture
def at(tmp_path, monkeypatch) -> AppTest:
    from workbench.pages import _state

    monkeypatch.setattr(_state, "SESSIONS_DIR", tmp_path / "sessions")
    monkeypatch.setattr(_state, "WORK_DIR", tmp_path / "work")
    return start()
