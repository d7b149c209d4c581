"""A new tab's first view (``app.first_view``): the Graph page remembers what it drew for a fresh
tab, and the entry script draws that, before the engine is imported, only for a new tab on the
Graph page and only from the code that wrote it. The browser test ``test_first_tab`` times it."""

from __future__ import annotations

import json
import threading

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import start
from workbench.app import first_view, paths


def test_the_graph_page_remembers_what_a_new_tab_showed(at):
    view = json.loads((paths.WORK_DIR / "cache" / "first_view.json").read_text())
    assert view["key"] == first_view.view_key()
    assert view["title"] == at.title[0].value == "Computational graph"
    assert view["caption"] == at.caption[0].value and "r18_stem" in view["caption"]
    drawn = next(m.value for m in at.markdown if "graph-preview" in m.value)  # the page's own static drawing
    assert view["svg"].startswith("<svg") and view["svg"] in drawn
    assert first_view.ENGINE_READY.is_set()


def _shown() -> None:
    from workbench.app import first_view

    first_view.show()  # left on the page: the entry script takes it away once the page is live


@pytest.fixture
def remembered(at, monkeypatch):
    """A remembered view, and an engine that is not imported yet in this process."""
    monkeypatch.setattr(first_view, "ENGINE_READY", threading.Event())
    return json.loads((paths.WORK_DIR / "cache" / "first_view.json").read_text())


def test_a_new_tab_shows_the_remembered_view_before_the_engine(remembered):
    app = AppTest.from_function(_shown).run()
    assert [t.value for t in app.title] == [remembered["title"]]
    assert [c.value for c in app.caption] == [remembered["caption"]]
    assert remembered["svg"] in app.markdown[0].value


def test_no_remembered_view_for_a_restored_tab_a_ready_engine_or_other_code(remembered, monkeypatch):
    restored = AppTest.from_function(_shown)
    restored.query_params["ws"] = "abc"
    assert not restored.run().title  # a reload restores its own session: not the fresh one
    path = paths.WORK_DIR / "cache" / "first_view.json"
    path.write_text(json.dumps({**remembered, "key": "other code"}))
    assert not AppTest.from_function(_shown).run().title
    path.write_text(json.dumps(remembered))
    first_view.ENGINE_READY.set()
    assert not AppTest.from_function(_shown).run().title


def test_the_entry_script_takes_the_view_away_once_the_page_is_live(remembered):
    app = start()  # the engine is imported: the page draws alone; the view, drawn first, is gone
    assert [t.value for t in app.title] == ["Computational graph"]
    assert sum("graph-preview" in m.value for m in app.markdown) == 1


@pytest.mark.slow
def test_the_install_step_remembers_the_view_and_leaves_nothing_else(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "ALT_WORKBENCH_WORK": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "workbench.app.first_view"], cwd=paths.ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "remembered" in done.stdout, done.stdout + done.stderr
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")] == ["cache", "cache/first_view.json"]
    view = json.loads((tmp_path / "cache" / "first_view.json").read_text())
    assert view["key"] == first_view.view_key() and view["svg"].startswith("<svg")
