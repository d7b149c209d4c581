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


def _run(app: AppTest) -> AppTest:
    app.run()
    assert not app.exception, app.exception
    return app


def test_a_new_tab_shows_the_remembered_view_before_the_engine(remembered):
    app = _run(AppTest.from_function(_shown))
    assert [t.value for t in app.title] == [remembered["title"]]
    assert [c.value for c in app.caption] == [remembered["caption"]]
    assert remembered["svg"] in app.markdown[0].value


def test_no_remembered_view_for_a_restored_tab_a_ready_engine_or_other_code(remembered):
    restored = AppTest.from_function(_shown)
    restored.query_params["ws"] = "abc"
    assert not _run(restored).title  # a reload restores its own session: not the fresh one
    path = paths.WORK_DIR / "cache" / "first_view.json"
    path.write_text(json.dumps({**remembered, "key": "other code"}))
    assert not _run(AppTest.from_function(_shown)).title
    path.write_text(json.dumps({"key": remembered["key"]}))  # a broken file: nothing drawn, no error
    assert not _run(AppTest.from_function(_shown)).title
    path.write_text(json.dumps(remembered))
    first_view.ENGINE_READY.set()
    assert not _run(AppTest.from_function(_shown)).title


def test_only_the_graph_page_gets_the_view():
    assert [first_view.page_of(u) for u in ("http://h:8501", "http://h:8501/graph", "http://h/wb/loops")] == \
        ["", "graph", "loops"]


def test_the_graph_page_takes_the_view_s_place(remembered, monkeypatch):
    drawn = []
    show = first_view.show
    monkeypatch.setattr(first_view, "show", lambda: drawn.append(show()) or drawn[-1])
    app = start()  # the view first (the engine counts as not imported), then the page in its place
    assert drawn == [True]
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


@pytest.mark.slow
def test_the_server_s_engine_without_pytorch_at_first_then_with_it():
    import subprocess
    import sys

    script = """
import sys
import numpy as np
from workbench.app.startup import import_engine
import_engine()
assert "tvm" in sys.modules and "torch" not in sys.modules, "PyTorch was imported with TVM"
from workbench.engine.session.session import new_session, replay
state = replay(new_session("r18_stem"))
values = state.graph.random_inputs(0)
got = state.scheduled_program().build(state.session.target).run(values)
want = state.graph.reference(values)
assert all(np.allclose(got[t], want[t], rtol=1e-4, atol=1e-4) for t in state.graph.outputs)
import torch, tvm_ffi
x = torch.randn(3, 5)
assert np.array_equal(tvm_ffi.from_dlpack(x).numpy(), x.numpy())  # tensors still cross by DLPack
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=paths.ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
