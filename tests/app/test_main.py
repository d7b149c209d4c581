"""AppTest tests of the entry script (``workbench/app/main.py``): every page renders on the default
model, and the sidebar's undo, redo and model switch change the session."""

from __future__ import annotations

import pytest

from tests.app.apptest import graph_labels, home, preset_form, session


PAGES = ["../pages/graph.py", "../pages/layouts.py", "../pages/loops.py", "../pages/tuning.py", "../pages/profile.py",
         "../pages/sessions.py"]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_default_model(at, page):
    at.switch_page(page).run()
    assert not at.exception, at.exception
    assert at.title and at.title[0].value  # the page drew its heading
    assert session(at).model == {"zoo": "r18_stem"}


def test_undo_and_redo_from_the_sidebar(at):
    preset_form(at)
    at.selectbox(key="preset_name").set_value("channels_last").run()
    at.button(key="apply_preset").click().run()
    assert len(session(at).steps) == 1
    home(at).button(key="undo").click().run()
    assert session(at).steps == ()
    at.button(key="redo").click().run()
    assert len(session(at).steps) == 1


def test_switching_the_model_starts_a_fresh_session(at):
    home(at).selectbox(key="model_pick").set_value("gmm").run()
    assert session(at).model == {"zoo": "gmm"} and session(at).steps == ()
    assert "gmm 1024x1024" in graph_labels(at), graph_labels(at)
