"""Work is never silently lost or mislabelled: the open session decides the model, switching
with unsaved actions asks first, a reload restores the tab, and results remember the session
revision they came from."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.app.apptest import home, preset_form, session, start


def apply_preset(app: AppTest, name: str = "channels_last") -> AppTest:
    preset_form(app)
    app.selectbox(key="preset_name").set_value(name).run()
    return app.button(key="apply_preset").click().run()


def save_as(app: AppTest, name: str) -> AppTest:
    app.switch_page("pages/sessions.py").run()
    app.text_input(key="save_name").input(name).run()
    return app.button(key="save").click().run()


def test_opening_a_session_of_another_model_switches_the_model_and_says_so(at):
    apply_preset(at)
    save_as(at, "stem")
    home(at).selectbox(key="model_pick").set_value("gmm").run()  # saved: no question asked
    assert session(at).model == {"zoo": "gmm"}
    at.switch_page("pages/sessions.py").run()
    at.selectbox(key="open_pick").set_value("stem").run()
    at.button(key="open").click().run()
    assert session(at).name == "stem" and len(session(at).steps) == 1
    assert any("the model is now r18_stem (was gmm)" in s.value for s in at.success), [s.value for s in at.success]
    home(at)
    assert at.selectbox(key="model_pick").value == "r18_stem"
    assert at.sidebar.caption and any("Session **stem**: 1 action" in c.value for c in at.sidebar.caption)


def test_switching_the_model_with_unsaved_actions_asks_first(at):
    apply_preset(at)
    home(at).selectbox(key="model_pick").set_value("gmm").run()
    assert session(at).model == {"zoo": "r18_stem"} and len(session(at).steps) == 1  # nothing replaced yet
    assert any("1 unsaved action " in w.value for w in at.warning)
    at.button(key="switch_cancel").click().run()
    assert at.selectbox(key="model_pick").value == "r18_stem" and len(session(at).steps) == 1
    at.selectbox(key="model_pick").set_value("gmm").run()
    at.button(key="switch_confirm").click().run()
    assert session(at).model == {"zoo": "gmm"} and session(at).steps == ()


def test_a_reload_restores_the_session_and_its_measured_variants(at):
    apply_preset(at)
    at.switch_page("pages/profile.py").run()
    at.button(key="profile_measure").click().run()
    assert len(at.session_state["variants"]) == 1
    home(at).button(key="undo").click().run()  # a redo stack to restore, too
    wid = at.query_params["ws"]
    again = start({"ws": wid})  # the same URL in a new browser session
    assert again.session_state["wid"] == wid
    assert again.session_state["state"].session == session(at)
    assert again.session_state["variants"] == at.session_state["variants"]
    assert [p.kernel for p in again.session_state["points"]] == [p.kernel for p in at.session_state["points"]]
    assert any("restored this tab's work" in s.value for s in again.success)
    other = start()  # another tab: its own fresh workspace
    assert other.query_params["ws"] != wid and session(other).steps == ()


def test_a_measurement_of_another_revision_is_not_shown_as_the_current_one(at):
    at.switch_page("pages/loops.py").run()
    at.button(key="measure").click().run()
    assert at.metric and "Program latency" in at.metric[0].label
    apply_preset(at)
    at.switch_page("pages/loops.py").run()
    assert not at.metric  # the latency shown was the previous layout's
    assert any("another revision" in c.value for c in at.caption)


def test_the_built_in_networks_open_from_the_model_picker(at):
    picker = home(at).selectbox(key="model_pick")
    assert {"resnet18", "mobilenet_v2", "bert_layer"} <= set(picker.options)
    picker.set_value("bert_layer").run()
    assert session(at).model == {"zoo": "bert_layer"} and not at.exception
    assert at.selectbox(key="model_pick").value == "bert_layer"
