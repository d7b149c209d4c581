"""AppTest tests of the Layouts page: presets and primitives through its forms change the graph's
layout labels or refuse in the user's terms; its previews are the session's own push
(``State.push``), and Apply keeps the previewed state instead of pushing again."""

from __future__ import annotations

from tests.app.apptest import click_reuses_the_preview, fill_split, graph_labels, preset_form, record_pushes, session


def test_a_primitives_preview_is_the_push_that_apply_keeps(at, monkeypatch):
    pushes, replays = record_pushes(monkeypatch)
    fill_split(at, "4, 16")
    base, step, preview = pushes[-1]
    assert (step.kind, step.target, step.primitive, step.kwargs) == ("layout", "conv", "split",
                                                                    {"dim": 1, "factors": [4, 16]})
    before, after = (row for _, row in at.dataframe[0].value.iterrows())  # the preview
    assert (before["tensor"], after["tensor"]) == ("before", "after")
    assert after["layout"] == preview.program.plan.layout_of("conv").label  # the preview shows the push
    assert after["stored shape"] == "1x4x16x112x112"
    click_reuses_the_preview(at, "apply_prim", pushes, replays)
    assert [(a.target, a.primitive) for a in session(at).steps] == [("conv", "split")]


def test_a_presets_preview_is_the_push_that_apply_keeps(at, monkeypatch):
    pushes, replays = record_pushes(monkeypatch)
    preset_form(at)
    at.selectbox(key="preset_name").set_value("channels_last").run()
    _, step, preview = pushes[-1]
    assert (step.kind, step.primitive) == ("preset", "channels_last")
    shown = at.dataframe[0].value  # the preview, above the session's layouts
    assert {row["tensor"]: row["layout"] for _, row in shown.iterrows()} == {
        k: preview.book.get(k).label for k in shown.tensor}
    click_reuses_the_preview(at, "apply_preset", pushes, replays)
    assert [(a.kind, a.primitive) for a in session(at).steps] == [("preset", "channels_last")]
    pushes.clear()
    at.switch_page("../pages/graph.py").run()  # drawing another page pushes and replays nothing
    assert pushes == [] and replays == []


def test_a_preset_through_the_form_changes_the_graph_layout_labels(at):
    before = graph_labels(at)
    preset_form(at)
    at.selectbox(key="preset_name").set_value("blocked").run()
    at.selectbox(key="layout_key").set_value("conv").run()
    at.button(key="apply_preset").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [(a.kind, a.primitive) for a in session(at).steps] == [("preset", "blocked")]
    at.switch_page("../pages/graph.py").run()
    after = graph_labels(at)
    assert after != before
    assert "[N C.o H W C.i]" in after  # conv, bias and relu took the blocked layout
    assert at.session_state["changed"] >= {"conv", "bias", "relu"}


def test_the_layouts_page_draws_its_open_tab_alone_and_keeps_the_others_choice(at):
    at.switch_page("../pages/layouts.py").run()
    assert {w.key for w in at.selectbox} >= {"layout_prim"} and "preset_name" not in {w.key for w in at.selectbox}
    at.selectbox(key="layout_prim").set_value("reorder").run()
    preset_form(at)
    assert "preset_name" in {w.key for w in at.selectbox} and "layout_prim" not in {w.key for w in at.selectbox}
    at.selectbox(key="preset_name").set_value("alt_tiled").run()
    at.session_state["layout_tab"] = "Primitive"
    at.switch_page("../pages/graph.py").run()  # the entry script, as a browser runs it before every page
    assert at.switch_page("../pages/layouts.py").run().selectbox(key="layout_prim").value == "reorder"
    at.switch_page("../pages/graph.py").run()
    assert preset_form(at).selectbox(key="preset_name").value == "alt_tiled"


def test_alt_tiled_can_keep_the_output_layout_from_its_checkbox(at):
    """Unticking tile_out previews one conversion op fewer and records the choice in the step."""
    preset_form(at)
    at.selectbox(key="preset_name").set_value("alt_tiled").run()
    conversions = lambda: next(c.value for c in at.caption if c.value.startswith("after propagation"))  # noqa: E731
    tiled = conversions()
    at.checkbox(key="pp_tile_out").uncheck().run()
    assert conversions() != tiled and int(conversions().split()[2]) == int(tiled.split()[2]) - 1
    at.button(key="apply_preset").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (step,) = session(at).steps
    assert step.kwargs["tile_out"] is False


def test_a_preset_on_a_tensor_that_has_a_layout_says_why_in_the_users_terms(at):
    preset_form(at)
    at.selectbox(key="preset_name").set_value("alt_tiled").run()
    at.selectbox(key="layout_key").set_value("conv").run()
    at.button(key="apply_preset").click().run()
    assert not at.error and len(session(at).steps) == 1, [e.value for e in at.error]
    (warning,) = [w.value for w in at.warning if w.value.startswith("Not applicable")]
    assert "conv is already" in warning and "undo the actions on conv" in warning, warning
    assert at.button(key="apply_preset").disabled


def test_a_primitive_through_the_form_is_recorded(at):
    fill_split(at, "4, 16").button(key="apply_prim").click().run()
    assert [(a.target, a.primitive, a.kwargs) for a in session(at).steps] == [
        ("conv", "split", {"dim": 1, "factors": [4, 16]})]


def test_an_invalid_primitive_shows_the_engine_message_and_changes_nothing(at):
    fill_split(at, "3, 16")
    shown = " ".join(w.value for w in at.warning)
    assert "[3, 16]" in shown and "48" in shown and "64" in shown
    assert at.button(key="apply_prim").disabled  # a browser user cannot apply it
    assert session(at).steps == ()
    at.switch_page("../pages/graph.py").run()
    assert "[N C H W]" in graph_labels(at) and not at.exception


def test_a_split_over_covering_a_dim_says_it_pads(at):
    fill_split(at, "5, 13")
    assert any("pads C 64 -> 65" in i.value for i in at.info), [i.value for i in at.info]
    assert not at.button(key="apply_prim").disabled
