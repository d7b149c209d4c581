"""Work is never silently lost or mislabelled: the open session decides the model, switching
with unsaved actions asks first, a reload restores the tab, and results remember the session
revision they came from."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import home, preset_form, session, start, tune_loops


def apply_preset(app: AppTest, name: str = "channels_last") -> AppTest:
    preset_form(app)
    app.selectbox(key="preset_name").set_value(name).run()
    return app.button(key="apply_preset").click().run()


def save_as(app: AppTest, name: str) -> AppTest:
    app.switch_page("../pages/sessions.py").run()
    app.text_input(key="save_name").input(name).run()
    return app.button(key="save").click().run()


def test_opening_a_session_of_another_model_switches_the_model_and_says_so(at):
    apply_preset(at)
    save_as(at, "stem")
    home(at).selectbox(key="model_pick").set_value("gmm").run()  # saved: no question asked
    assert session(at).model == {"zoo": "gmm"}
    at.switch_page("../pages/sessions.py").run()
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
    at.switch_page("../pages/profile.py").run()
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
    at.switch_page("../pages/loops.py").run()
    at.button(key="measure").click().run()
    assert at.metric and "Program latency" in at.metric[0].label
    apply_preset(at)
    at.switch_page("../pages/loops.py").run()
    assert not at.metric  # the latency shown was the previous layout's
    assert any("another revision" in c.value for c in at.caption)


def test_the_built_in_networks_open_from_the_model_picker(at):
    picker = home(at).selectbox(key="model_pick")
    assert {"resnet18", "mobilenet_v2", "bert_layer"} <= set(picker.options)
    picker.set_value("bert_layer").run()
    assert session(at).model == {"zoo": "bert_layer"} and not at.exception
    assert at.selectbox(key="model_pick").value == "bert_layer"


########## Reloads and restarts ##########

def test_the_workspace_id_comes_back_to_the_url_after_a_page_switch(at):
    wid = at.query_params["ws"]
    at.query_params.clear()  # what a click on a page in the sidebar does to the URL
    home(at)
    assert at.query_params.get("ws") == wid


def test_a_reload_restores_the_budget_and_the_other_kept_choices(at):
    at.switch_page("../pages/tuning.py").run()
    at.number_input(key="tune_budget").set_value(7).run()
    at.radio(key="tune_stage").set_value("loop").run()
    at.switch_page("../pages/graph.py").run()  # the entry script, which saves the workspace after every run
    again = start({"ws": at.query_params["ws"]})
    again.switch_page("../pages/tuning.py").run()
    assert again.number_input(key="tune_budget").value == 7 and again.radio(key="tune_stage").value == "loop"


@pytest.mark.tuning
def test_a_reload_restores_the_last_tuning_run_with_its_curves_and_it_can_be_applied(at):
    """Loop-only stage, 2 measurements on C1D; a new browser session on the same URL (a reload, a
    new tab, or the app restarted) shows the finished run, its curves and its Apply button."""
    job = tune_loops(at, "c1d", 2)
    assert job.status().state == "done", job.status()
    at.switch_page("../pages/graph.py").run()  # the entry script saves the workspace
    again = start({"ws": at.query_params["ws"]})
    assert any("the last tuning run" in s.value for s in again.success), [s.value for s in again.success]
    again.switch_page("../pages/tuning.py").run()
    assert not again.exception, again.exception
    assert again.session_state["tune_job"].dir == job.dir and again.number_input(key="tune_budget").value == 2
    assert list(again.session_state["tune_tasks"]) == ["conv"]
    assert any(m.value.startswith("Tuning done") for m in again.success), [m.value for m in again.success]
    fig = json.loads(again.get("plotly_chart")[0].proto.spec)
    assert any(t.get("name", "").endswith(": best") for t in fig["data"])
    again.button(key="tune_apply").click().run()
    assert session(again).key() == job.tuned_state(again.session_state["wid"]).session.key()  # the run's result


########## Nothing stale ##########

def test_the_session_name_field_follows_the_open_session(at, monkeypatch):
    from tests.app.apptest import upload_model
    from tests.engine.models.frontend.test_import import _onnx

    save_as(at, "first")
    home(at).selectbox(key="model_pick").set_value("gmm").run()
    at.switch_page("../pages/sessions.py").run()
    assert at.text_input(key="save_name").value == "gmm"
    at.text_input(key="save_name").input("typed").run()
    assert at.text_input(key="save_name").value == "typed"  # what the user types stays
    at.selectbox(key="open_pick").set_value("first").run()
    at.button(key="open").click().run()
    assert session(at).name == "first" and at.text_input(key="save_name").value == "first"
    upload_model(monkeypatch, "mlp.onnx", _onnx())
    at.run().button(key="import_model").click().run()
    assert not at.error, [e.value for e in at.error]
    assert session(at).name.startswith("mlp") and at.text_input(key="save_name").value == session(at).name


def test_a_replay_result_is_put_away_when_the_model_changes(at):
    home(at).selectbox(key="model_pick").set_value("c1d").run()
    at.switch_page("../pages/sessions.py").run()
    at.button(key="replay").click().run()
    job = at.session_state["replay_job"]
    assert job.wait(timeout=180).state == "done", job.status()
    at.run()
    assert any(m.value.startswith("replay ok") for m in at.success), [m.value for m in at.success]
    apply_preset(at, "channels_last")  # another revision of the same session: said so, not shown as this one's
    at.switch_page("../pages/sessions.py").run()
    assert not any(m.value.startswith("replay ok") for m in at.success)
    assert any("The last replay was of c1d on c1d as it was then" in c.value for c in at.caption)
    home(at).selectbox(key="model_pick").set_value("gmm").run()
    at.button(key="switch_confirm").click().run()  # the preset is unsaved
    for model in ("gmm", "c1d"):  # another model, and back: the replay is gone, not shown as the new session's
        if model == "c1d":
            home(at).selectbox(key="model_pick").set_value("c1d").run()
        at.switch_page("../pages/sessions.py").run()
        assert not any(m.value.startswith(("replay", "The last replay")) for m in [*at.success, *at.caption, *at.info])
        assert "replay_job" not in at.session_state


def test_measurements_of_another_model_are_not_shown_with_this_ones(at):
    at.switch_page("../pages/profile.py").run()
    at.button(key="profile_measure").click().run()
    assert at.get("plotly_chart") and len(at.session_state["variants"]) == 1
    home(at).selectbox(key="model_pick").set_value("c1d").run()
    at.switch_page("../pages/profile.py").run()
    assert not at.exception, at.exception
    assert any(i.value.startswith("No variant measured yet") for i in at.info)
    at.switch_page("../pages/loops.py").run()
    assert not any("Variants" in m.value for m in at.markdown)
    home(at).selectbox(key="model_pick").set_value("r18_stem").run()
    at.switch_page("../pages/loops.py").run()  # back on r18_stem: its variant comes back
    assert any("Variants of r18_stem measured in this tab" in m.value for m in at.markdown)


def test_page_memos_of_another_model_are_forgotten(at):
    at.switch_page("../pages/loops.py").run()
    at.button(key="apply_expert").click().run()  # the loop page remembers conv's nest before it
    assert "loop_before" in at.session_state
    at.switch_page("../pages/graph.py").run()
    at.toggle(key="graph_collapse").set_value(True).run()
    fused = at.multiselect(key="graph_expanded").options
    at.multiselect(key="graph_expanded").set_value([fused[0]]).run()
    home(at).selectbox(key="model_pick").set_value("c1d").run()
    at.button(key="switch_confirm").click().run()
    assert "loop_before" not in at.session_state and "loop_seeded" not in at.session_state
    assert not at.session_state["graph_expanded"]  # the graph page drew its list afresh
    at.switch_page("../pages/graph.py").run()
    at.switch_page("../pages/loops.py").run()
    assert not at.exception, at.exception


########## Errors in one line ##########

def test_a_model_that_fails_to_open_changes_nothing_and_can_be_picked_again(at, monkeypatch):
    import functools

    from workbench.engine.models import zoo

    real = zoo.NETWORKS["bert_layer"]

    @functools.wraps(real)
    def fails_once(**options):
        monkeypatch.setitem(zoo.NETWORKS, "bert_layer", real)
        raise RuntimeError("out of memory\nat line 2")

    monkeypatch.setitem(zoo.NETWORKS, "bert_layer", fails_once)
    home(at).selectbox(key="model_pick").set_value("bert_layer").run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [
        "bert_layer could not be opened: RuntimeError: out of memory; the session on r18_stem is unchanged; "
        "pick bert_layer again to retry"]
    assert session(at).model == {"zoo": "r18_stem"} and at.selectbox(key="model_pick").value == "r18_stem"
    at.selectbox(key="model_pick").set_value("bert_layer").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert session(at).model == {"zoo": "bert_layer"}


def test_an_unexpected_error_shows_in_one_line_not_as_a_traceback(at, monkeypatch):
    from workbench.engine.session.session import State
    from workbench.viz import graph

    apply_preset(at)
    monkeypatch.setattr(State, "undo", lambda self: (_ for _ in ()).throw(RuntimeError("undo broke\ndetails")))
    home(at).button(key="undo").click().run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == ["RuntimeError: undo broke; nothing was changed; try again, or reload the "
                                           "page (the tab's work is kept)"]
    assert len(session(at).steps) == 1
    monkeypatch.setattr(graph, "graph_figure", lambda *a, **k: (_ for _ in ()).throw(ValueError("no figure")))
    home(at)
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == ["the Graph page failed: ValueError: no figure; reload the page to try again "
                                           "(the tab's work is kept)"]


def test_a_model_picked_over_while_it_was_built_is_not_opened(at, monkeypatch):
    """A slow build finishing after the user picked yet another model (in the browser, an older
    run still importing) does not replace the session: the newer pick is the one asked about."""
    import functools

    import streamlit

    from workbench.engine.models import zoo

    real = zoo.NETWORKS["bert_layer"]

    @functools.wraps(real)
    def picked_over(**options):
        streamlit.session_state.model_pick = "gmm"  # the user's next pick, while this one builds
        return real(seq=8, hidden=32, heads=2)

    monkeypatch.setitem(zoo.NETWORKS, "bert_layer", picked_over)
    apply_preset(at)
    home(at).selectbox(key="model_pick").set_value("bert_layer").run()
    at.button(key="switch_confirm").click().run()
    assert not at.exception, at.exception
    assert session(at).model == {"zoo": "r18_stem"} and len(session(at).steps) == 1
    assert any("Switching to **gmm** replaces this session" in w.value for w in at.warning), [w.value for w in at.warning]
