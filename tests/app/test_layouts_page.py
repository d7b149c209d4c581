"""AppTest tests of the Layouts page's single-pass flow: its previews are the session's own push
(``State.push``), and Apply keeps the previewed state instead of pushing again."""

from __future__ import annotations

from tests.app.apptest import click_reuses_the_preview, preset_form, record_pushes, session
from tests.app.test_pages import fill_split


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
