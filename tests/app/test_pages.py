"""AppTest tests of every page (Streamlit's headless script runner): each renders on the
default model, and the forms change the session, or refuse with the engine's message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import graph_labels, home, preset_form, session, start

PAGES = ["../pages/graph.py", "../pages/layouts.py", "../pages/loops.py", "../pages/tuning.py", "../pages/profile.py",
         "../pages/sessions.py"]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_default_model(at, page):
    at.switch_page(page).run()
    assert not at.exception, at.exception
    assert at.title and at.title[0].value  # the page drew its heading
    assert session(at).model == {"zoo": "r18_stem"}


def test_graph_opens_on_r18_stem_with_its_tensors(at):
    labels = graph_labels(at)
    for tensor in ("pad 1x3x230x230", "conv 1x64x112x112", "relu 1x64x112x112"):
        assert tensor in labels
    assert "[N C H W]" in labels


def test_the_first_graph_run_sends_a_static_drawing_and_later_runs_do_not(at):
    def drawings():
        return [m.value for m in at.markdown if 'class="graph-preview"' in m.value]

    (svg,) = drawings()  # the fixture's tab has run the graph page once
    for op in ("pad", "conv", "bias", "relu"):
        assert f"<tspan font-weight=\"bold\">{op}</tspan>" in svg
    assert "display: none" in svg  # its CSS hides it once Plotly has drawn the chart
    at.run()
    assert not at.exception and drawings() == []
    assert at.get("plotly_chart")  # the chart itself is sent on every run


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


def fill_split(app: AppTest, factors: str) -> AppTest:
    """The Layouts page's primitive form: split dim 1 of conv by ``factors``."""
    app.switch_page("../pages/layouts.py").run()
    app.selectbox(key="layout_key").set_value("conv").run()
    app.selectbox(key="layout_prim").set_value("split").run()
    app.selectbox(key="lp_split_dim").set_value(1).run()
    return app.text_input(key="lp_split_factors_64").input(factors).run()


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


def test_the_default_loop_split_applies_to_every_loop(at):
    """The factors' default divides the chosen loop's extent, whichever loop it is."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    at.selectbox(key="loop_prim").set_value("split").run()
    at.selectbox(key="la_split_block").set_value("conv").run()
    for loop in at.selectbox(key="la_split_loop").options[:4]:
        at.selectbox(key="la_split_loop").set_value(loop).run()
        text = next(t.value for t in at.text_input if t.key.startswith("la_split_factors"))
        extent = int(at.text_input[-1].label.rsplit("extent ", 1)[1].rstrip(")"))
        assert text == f"-1, {max(f for f in range(1, 17) if extent % f == 0)}"
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    assert session(at).steps[-1].primitive == "split"


def test_every_loop_primitive_starts_from_arguments_that_apply(at):
    """Each primitive's form starts from a block and loops TVM accepts on the kernel (reorder and
    fuse with two loops, compute_at under another block): no refusal before the user types."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    for prim in at.selectbox(key="loop_prim").options:
        name = prim.split(":", 1)[0]
        at.selectbox(key="loop_prim").set_value(name).run()
        refusals = [w.value for w in at.warning if "would be refused" in w.value]
        assert not refusals and not at.button(key="apply_loop").disabled, (name, refusals)
    assert session(at).steps == ()


def test_transform_layout_names_the_written_buffers_and_its_defaults_apply(at):
    """``write_index`` picks among the block's written buffers by name; transform_layout's
    factors default to one 1 per dim of the chosen buffer and its perm to the identity (an
    action that always applies, here to a cache_write's tile); a split factor adds a dim to the
    perm's default."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    at.selectbox(key="loop_prim").set_value("cache_write").run()
    at.selectbox(key="la_cache_write_block").set_value("conv").run()
    assert at.selectbox(key="la_cache_write_write_index").options[0].startswith("0 (conv, shape [")
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    at.selectbox(key="loop_prim").set_value("transform_layout").run()
    at.selectbox(key="la_transform_layout_block").set_value("conv").run()
    written = at.selectbox(key="la_transform_layout_write_index").options[0]
    shape = json.loads(written.split("shape ", 1)[1].rstrip(")"))
    assert written.startswith("0 (conv_")  # the tile cache_write allocated, not the kernel's output
    factors = next(t for t in at.text_input if t.key.startswith("la_transform_layout_factors"))
    perm = next(t for t in at.text_input if t.key.startswith("la_transform_layout_perm"))
    assert factors.value == ", ".join("1" for _ in shape) and perm.value == ", ".join(map(str, range(len(shape))))
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    assert session(at).steps[-1].primitive == "transform_layout"
    d = next(i for i, n in enumerate(shape) if n % 2 == 0)
    factors.input(", ".join("2" if i == d else "1" for i in range(len(shape)))).run()
    perm = next(t for t in at.text_input if t.key.startswith("la_transform_layout_perm"))
    assert perm.value == ", ".join(map(str, range(len(shape) + 1)))


def test_a_loop_primitive_updates_the_loop_nest(at):
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    before = _side_by_side(at)
    assert before[0] == before[1] and "T.parallel" not in before[1]
    at.selectbox(key="loop_prim").set_value("parallel").run()
    at.selectbox(key="la_parallel_block").set_value("conv").run()
    loop = at.selectbox(key="la_parallel_loop").options[0]
    at.selectbox(key="la_parallel_loop").set_value(loop).run()
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    assert session(at).steps[-1].primitive == "parallel"
    left, right = _side_by_side(at)
    assert "T.parallel" in right and "T.parallel" not in left
    assert left == before[0]  # the "before" side shows the nest before the primitive


def _side_by_side(at) -> tuple[str, str]:
    """The text of the left and right columns of the side-by-side nests (one HTML table), blank
    lines left out (the diff aligns the sides with empty cells)."""
    import html
    import re

    body = next(h.proto.body for h in at.get("html") if "nest-pair" in h.proto.body)
    body = body.split("<div class='nest nest-one'>")[0]  # the wide table (the stacked nests follow it)
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)[1:]  # the header row aside
    cells = [re.findall(r"<td>(.*?)</td>", r, re.S) for r in rows]  # the code cells (line numbers have a class)
    text = lambda c: html.unescape(re.sub(r"<[^>]+>", "", c)).replace("\xa0", " ")  # noqa: E731
    side = lambda k: "\n".join(t for c in cells if c and (t := text(c[k])))  # noqa: E731 - the other side's gaps dropped
    return side(0), side(-1)


def test_the_loop_table_names_each_loop_after_its_layout_dim(at):
    """r18_stem's conv writes NCHW: its loops i0..i3 run over N, C, H, W, its reductions keep their names."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    table = next(d.value for d in at.dataframe if "layout dim" in d.value.columns)
    conv = table[table.block == "conv"]
    spatial = conv[~conv.reduction]
    assert list(spatial["layout dim"]) == ["N", "C", "H", "W"], conv
    assert all(conv[conv.reduction]["layout dim"] == conv[conv.reduction]["loop"]), conv


def test_a_loop_primitive_tvm_refuses_shows_its_reason_and_changes_nothing(at):
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    at.selectbox(key="loop_prim").set_value("compute_inline").run()
    at.selectbox(key="la_compute_inline_block").set_value("conv").run()
    # refused before Apply (the live check), in TVM's words, and Apply is disabled
    # (the page names the primitive; the session's "action 0 (loop on 'conv'): step 0:" context is left out)
    assert any(w.value.startswith("compute_inline would be refused: compute_inline(block='conv')") and
               "action 0" not in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.button(key="apply_loop").disabled and session(at).steps == ()


def test_the_loops_page_previews_a_primitive_and_shows_the_kernels_assembly(at):
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    at.selectbox(key="loop_prim").set_value("parallel").run()
    at.selectbox(key="la_parallel_block").set_value("conv").run()
    at.radio(key="nest_view").set_value("preview of parallel").run()
    assert "+" in at.code[-1].value and "T.parallel" in at.code[-1].value and session(at).steps == ()
    at.button(key="apply_expert").click().run()
    at.radio(key="nest_view").set_value("assembly").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["vector FMAs"]) > 0 and metrics["widest vector"] in ("256 bit", "512 bit"), metrics
    assert any("vfmadd" in c.value for c in at.code)  # the hot loop
    at.radio(key="nest_view").set_value("diff from default").run()
    assert "T.parallel" in at.code[-1].value and "+" in at.code[-1].value


def test_the_loops_page_lists_a_conversions_analytic_schedule(at):
    """A conversion kernel shows its analytic schedule's steps, folded away when there are many
    (a padded unfold's border copies each get steps of their own)."""
    preset_form(at)
    at.selectbox(key="preset_name").set_value("blocked").run()
    at.selectbox(key="layout_key").set_value("conv").run()
    at.button(key="apply_preset").click().run()
    at.switch_page("../pages/loops.py").run()
    conversions = [k for k in at.selectbox(key="loop_kernel").options if k.startswith("convert")]
    assert conversions
    at.selectbox(key="loop_kernel").set_value(conversions[0].split()[0]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (listing,) = [e for e in at.expander if e.label.endswith("loop steps")]
    count = int(listing.label.split()[1])
    steps = listing.code[0].value.splitlines()
    assert len(steps) == count > 0 and all("(block=" in s for s in steps)


def test_save_then_open_gives_the_same_session(at):
    preset_form(at)
    at.selectbox(key="preset_name").set_value("channels_last").run()
    at.selectbox(key="layout_key").set_value("conv").run()
    at.button(key="apply_preset").click().run()
    saved = session(at)
    at.switch_page("../pages/sessions.py").run()
    at.text_input(key="save_name").input("mine").run()
    at.button(key="save").click().run()
    assert not at.error, [e.value for e in at.error]
    home(at).button(key="undo").click().run()
    assert session(at).steps == ()
    at.switch_page("../pages/sessions.py").run()
    at.selectbox(key="open_pick").set_value("mine").run()
    at.button(key="open").click().run()
    opened = session(at)  # the same actions; the file also pins the kernels they leave unscheduled
    assert opened.pins and {**opened.to_json(), "pinned": []} == {**saved.to_json(), "name": "mine"}


def test_a_bad_session_name_is_refused(at):
    at.switch_page("../pages/sessions.py").run()
    at.text_input(key="save_name").input("../escape").run()
    at.button(key="save").click().run()
    assert any("invalid session name" in e.value for e in at.error)


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


@pytest.mark.tuning
def test_tuning_runs_in_a_worker_shows_curves_and_applies_the_result(at):
    """Loop-only stage, 2 measurements, on the small C1D model: start, watch, apply."""
    home(at).selectbox(key="model_pick").set_value("c1d").run()
    at.switch_page("../pages/tuning.py").run()
    at.radio(key="tune_stage").set_value("loop").run()
    at.number_input(key="tune_budget").set_value(2).run()
    at.button(key="tune_start").click().run()
    job = at.session_state["tune_job"]
    assert job.wait(timeout=240).state == "done", job.status()
    rows = job.progress()
    assert len(rows) == 2 and all(r["stage"] == "loop" for r in rows)
    at.run()
    assert not at.exception, at.exception
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert any(t.get("name", "").endswith(": best") for t in fig["data"])
    at.button(key="tune_apply").click().run()
    tuned = [a for a in session(at).steps if a.kind == "tuned"]
    assert tuned and tuned[0].target == "conv" and tuned[0].get("latency_ms") > 0


def _on_sessions_page_with_c1d(app: AppTest) -> AppTest:
    home(app).selectbox(key="model_pick").set_value("c1d").run()
    return app.switch_page("../pages/sessions.py").run()


def _infos(app: AppTest) -> str:
    return " | ".join(i.value for i in app.info)


@pytest.mark.slow
def test_replays_of_two_tabs_wait_in_one_line_and_a_tab_runs_one_job(at):
    """Replay runs as a job: with the machine busy, two tabs' replays queue (place shown), the first
    tab cannot start a tuning beside its replay, and once the slot frees both run, in order."""
    import fcntl

    from workbench.engine.tuning.jobs.worker import JobQueue
    from workbench.app import state as _state

    a, b = _on_sessions_page_with_c1d(at), _on_sessions_page_with_c1d(start())
    queue = JobQueue.at(_state.WORK_DIR)
    queue.folder.mkdir(parents=True, exist_ok=True)
    with open(queue.folder / "slot-0.lock", "w") as busy:  # another job holds the machine's one slot
        fcntl.flock(busy, fcntl.LOCK_EX)
        a.button(key="replay").click().run()
        b.button(key="replay").click().run()
        assert not a.exception and not b.exception, (a.exception, b.exception)
        assert "replay queued, #1 in line" in _infos(a) and "replay queued, #2 in line" in _infos(b)
        a.switch_page("../pages/tuning.py").run()
        a.button(key="tune_start").click().run()
        assert any("this tab already has a replay job" in e.value and "one job per tab" in e.value
                   for e in a.error), [e.value for e in a.error]
        assert a.session_state["replay_job"].status().state == "queued"
    first, second = a.session_state["replay_job"], b.session_state["replay_job"]
    assert first.wait(timeout=120).state == "done", first.status()
    assert second.wait(timeout=120).state == "done", second.status()
    started = json.loads((second.dir / "slot.json").read_text())["since"]
    assert started >= json.loads((first.dir / "result.json").read_text())["finished"]
    b.run()
    assert any(m.value.startswith("replay ok") for m in b.success), [m.value for m in b.success]


def test_an_oversized_session_upload_is_refused_and_changes_nothing(at, monkeypatch):
    import streamlit

    from workbench.engine.session.session import MAX_SESSION_MB, dumps, new_session

    before = session(at).to_json()
    padding = " " * ((MAX_SESSION_MB << 20) + 1)  # valid JSON, one byte too many
    big = dumps(new_session("gmm")).replace('"actions"', padding + '"actions"').encode()

    class Upload:  # AppTest cannot upload: the page gets this from st.file_uploader instead
        name = "big.json"

        def getvalue(self) -> bytes:
            return big

    monkeypatch.setattr(streamlit, "file_uploader", lambda *args, **kwargs: Upload())
    at.switch_page("../pages/sessions.py").run()
    at.button(key="open_upload").click().run()
    assert [e.value for e in at.error] == [f"big.json: a session file may be at most {MAX_SESSION_MB} MB; "
                                           f"this one is {len(big) / 2**20:.2f} MB"]
    assert session(at).to_json() == before


@pytest.mark.slow
def test_profile_measures_draws_the_roofline_and_compares_cache_profiles(at, tmp_path):
    from workbench.engine.session.session import new_session, save
    from workbench.app import state as _state

    save(new_session("r18_stem", name="plain"), _state.SESSIONS_DIR / "plain.json")
    preset_form(at)
    at.selectbox(key="preset_name").set_value("alt_tiled").run()
    at.text_input(key="pp_tiles").input("4, 16").run()
    at.button(key="apply_preset").click().run()
    at.switch_page("../pages/profile.py").run()
    at.button(key="profile_measure").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    charts = {c.key: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    roof = charts["roofline"]
    assert any(t.get("name", "").startswith("conv") for t in roof["data"])  # the measured conv is on it
    rates = next(d.value for d in at.get("dataframe") if "% of copy" in d.value.columns)
    assert rates["kernel"].str.startswith("convert_").all() and (rates["GB/s"] > 0).all()
    assert rates["% of copy"].tolist() == pytest.approx((rates["GB/s"] / rates["GB/s"].iloc[0]
                                                         * rates["% of copy"].iloc[0]).tolist(), rel=1e-2)
    assert at.selectbox(key="profile_kernel").value == "conv"
    at.selectbox(key="profile_compare").set_value("plain").run()
    misses = json.loads(next(c for c in at.get("plotly_chart") if c.key == "misses").proto.spec)
    bars = {t["name"]: t["y"] for t in misses["data"]}
    assert set(bars) == {"current (r18_stem)", "plain"}
    l1 = 0  # the first bar: L1d misses, all lines; the tiled layout needs fewer than NCHW
    assert bars["current (r18_stem)"][l1] < bars["plain"][l1]
    from workbench.engine.measure.counters import perf_unavailable

    at.button(key="counters").click().run()
    assert not at.exception
    tables = {d.key for d in at.get("dataframe")}
    if reason := perf_unavailable():  # this machine exposes no PMU: the page says why
        assert any(i.value == f"Model only: {reason}" for i in at.info) and "counters_table" not in tables
    else:
        assert "counters_table" in tables


def test_an_uploaded_pickle_is_data_never_code(at, monkeypatch, tmp_path):
    """A .pt2-style zip whose pickle would write a file when unpickled: the upload is refused
    as a session file and nothing runs (the app reads uploads as text, never unpickles)."""
    import io
    import os
    import pickle
    import zipfile

    import streamlit

    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("model/data.pkl", pickle.dumps(Payload()))
    before = session(at).to_json()

    class Upload:
        name = "model.pt2"

        def getvalue(self) -> bytes:
            return buf.getvalue()

    monkeypatch.setattr(streamlit, "file_uploader", lambda *args, **kwargs: Upload())
    at.switch_page("../pages/sessions.py").run()
    at.button(key="open_upload").click().run()
    assert len(at.error) == 1 and at.error[0].value.startswith("model.pt2: not valid JSON"), [e.value for e in at.error]
    assert not marker.exists() and session(at).to_json() == before
    at.button(key="import_model").click().run()  # nor as a model
    assert [e.value for e in at.error] == ["model.pt2: a .pt2 file is not accepted as an upload, since "
                                           "loading it unpickles data and can run code; export the model to ONNX, or "
                                           "import the .pt2 with the command line"]
    assert not marker.exists() and session(at).to_json() == before


def _upload(monkeypatch, name: str, data: bytes) -> None:
    """The model uploader returns this file (AppTest cannot upload); the session uploader nothing."""
    import streamlit

    class Upload:
        def getvalue(self) -> bytes:
            return data

    Upload.name = name
    monkeypatch.setattr(streamlit, "file_uploader",
                        lambda *args, key=None, **kwargs: Upload() if key == "model_upload" else None)


def test_an_uploaded_onnx_model_opens_as_a_new_session_pinned_to_its_file(at, monkeypatch):
    from tests.engine.models.frontend.test_import import _onnx
    from workbench.app import state as _state

    before = session(at).to_json()
    _upload(monkeypatch, "mlp.onnx", _onnx()[:100])  # truncated: refused, nothing changes
    at.switch_page("../pages/sessions.py").run()
    at.button(key="import_model").click().run()
    assert len(at.error) == 1 and at.error[0].value.startswith("mlp.onnx: "), [e.value for e in at.error]
    assert session(at).to_json() == before

    _upload(monkeypatch, "mlp.onnx", _onnx())
    at.button(key="import_model").click().run()
    assert not at.error, [e.value for e in at.error]
    model = session(at).model
    stored = Path(model["file"])
    assert stored.parent == _state.WORK_DIR / "models" and stored.read_bytes() == _onnx()
    assert model["inputs"] == {"x": [1, 8]} and session(at).steps == ()
    assert any(m.value.startswith("imported mlp.onnx: 2 ops") for m in at.success), [m.value for m in at.success]
    assert "file: " + stored.name in " ".join(c.value for c in at.caption)


class _FinishedJob:
    """A tuning job that already ran, as the Tuning page sees it: its progress lines, its status."""

    def __init__(self, folder: Path, rows: list[dict], budget: int = 8, started: float = 0.0,
                 running: bool = False) -> None:
        self.dir, self._rows, self.budget, self.started, self._running = folder, rows, budget, started, running

    def progress(self) -> list[dict]:
        return self._rows

    def status(self):
        from workbench.engine.tuning.jobs.worker import JobStatus

        return JobStatus("running" if self._running else "stopped")

    def running(self) -> bool:
        return self._running

    def tuned_state(self, owner=None):
        return None


def test_tuning_status_shows_each_tasks_best_and_their_sum_not_the_fastest_kernel(at, tmp_path):
    from workbench.engine.tuning.progress import summarize_progress

    rows = [{"task": "pad", "stage": "loop", "latency_ms": 0.001, "best_ms": 0.001},
            {"task": "conv", "stage": "loop", "latency_ms": 0.5, "best_ms": 0.5},
            {"task": "conv", "stage": "loop", "latency_ms": None, "best_ms": 0.5}]
    at.session_state["tune_job"] = _FinishedJob(tmp_path / "job", rows)
    at.session_state["tune_tasks"] = ["pad", "conv", "relu"]
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    status = next(m.value for m in at.markdown if "best per task summed" in m.value)
    assert summarize_progress(rows, ["pad", "conv", "relu"]).headline() in status
    assert "0.5010 ms over 2 tasks" in status and "1 of 3 tasks without a result yet" in status
    assert "3 measurements" in status and "1 failed candidate (skipped)" in status
    (bests,) = [d.value for d in at.get("dataframe") if "best ms" in d.value.columns]
    assert dict(zip(bests["task"], bests["best ms"].fillna(-1))) == {"pad": 0.001, "conv": 0.5, "relu": -1}
    trials = lambda: next(d.value for d in at.get("dataframe") if "trace" in d.value.columns)  # noqa: E731
    assert len(trials()) == 3
    at.radio(key="trials_outcome").set_value("failed").run()
    assert list(trials()["task"]) == ["conv"] and trials()["latency ms"].isna().all()
    at.radio(key="trials_outcome").set_value("all").run()
    at.multiselect(key="trials_tasks").set_value(["pad"]).run()
    assert list(trials()["task"]) == ["pad"]


def test_a_running_tuning_shows_measurements_of_its_budget_and_the_time_left(at, tmp_path):
    import time

    now = time.time()
    rows = [{"task": "conv", "stage": "loop", "latency_ms": 0.5 - i / 10, "time": now - 30 + 10 * i} for i in range(3)]
    at.session_state["tune_job"] = _FinishedJob(tmp_path / "job", rows, budget=12, started=now - 40, running=True)
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    status = next(m.value for m in at.markdown if "best per task summed" in m.value)
    assert "3 of 12 measurements" in status and "elapsed" in status and " left" in status, status


def test_the_joint_budget_says_how_many_layouts_it_scores_and_survives_a_page_switch(at):
    at.switch_page("../pages/tuning.py").run()
    at.radio(key="tune_stage").set_value("joint").run()
    at.number_input(key="tune_budget").set_value(2).run()  # the least: still the current layout and the prior's best
    assert not any("scores only one" in w.value for w in at.warning), [w.value for w in at.warning]
    assert any("Layout candidates scored: conv 2 of" in c.value for c in at.caption), [c.value for c in at.caption]
    at.number_input(key="tune_budget").set_value(77).run()
    assert any("Layout candidates scored: conv 23 of" in c.value for c in at.caption), [c.value for c in at.caption]
    at.switch_page("../pages/graph.py").run()  # the entry script, as a browser runs it on every page (the Graph page here)
    assert not at.number_input and at.session_state["tune_budget"] == 77
    at.switch_page("../pages/tuning.py").run()
    assert at.number_input(key="tune_budget").value == 77 and at.radio(key="tune_stage").value == "joint"


def test_profile_explains_a_kernel_above_its_roof_and_the_miss_bounds(at):
    from workbench.engine.measure.roofline import RooflinePoint

    # a 64 KiB copy in a microsecond: 128 GB/s, above any DRAM roof, yet its data fits a cache
    pad = RooflinePoint("pad", "v1", flops=0, bytes=64 * 1024, latency_ms=0.0005)
    at.session_state["timings"] = {"v1": {"pad": pad.latency_ms}}
    at.session_state["points"] = [pad]
    at.switch_page("../pages/profile.py").run()
    assert not at.exception, at.exception
    (table,) = [d.value for d in at.get("dataframe") if "% of roof" in d.value.columns]  # AppTest keeps no keys
    (row,) = table.to_dict("records")
    assert row["% of roof"] > 100 and row["buffers fit"] != "DRAM only"
    assert row["note"].startswith(f"above the DRAM roof: its 64 KiB of buffers fit {row['buffers fit']}")
    captions = " ".join(c.value for c in at.caption)
    assert "pad above 100% of the roof, which is no error" in captions  # the kernel by name
    assert "at least the compulsory misses" in captions
    assert any("bounded by" in d.value.columns for d in at.get("dataframe"))


def test_a_click_on_a_loop_table_row_fills_the_primitives_block_and_loop(at):
    """A selected row (what a click sets) puts its block and loop into the form: split asks for
    one loop, fuse collects the clicked loops of one block."""
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    table = next(d.value for d in at.dataframe if "layout dim" in d.value.columns)
    row = int(table.index[(table.block == "conv") & (table.loop == table[table.block == "conv"].loop.iloc[2])][0])
    at.selectbox(key="loop_prim").set_value("split").run()
    at.session_state["loop_table_conv_0"] = {"selection": {"rows": [row], "columns": []}}
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="la_split_block").value == "conv"
    assert at.selectbox(key="la_split_loop").value == table.loop[row]
    at.selectbox(key="loop_prim").set_value("fuse").run()
    for r in (row - 1, row):
        at.session_state["loop_table_conv_0"] = {"selection": {"rows": [r], "columns": []}}
        at.run()
    assert at.multiselect(key="la_fuse_loops").value == [table.loop[row - 1], table.loop[row]]  # outermost first
    assert not any(w.value.startswith("fuse would be refused") for w in at.warning), [w.value for w in at.warning]
    at.button(key="apply_loop").click().run()  # the clicked row is not left checked over the new loops
    assert session(at).steps[-1].primitive == "fuse" and at.session_state["loop_table_resets"] == 1
    assert "loop_table_conv_1" not in at.session_state or not at.session_state["loop_table_conv_1"]["selection"]["rows"]


def _drawn_nodes(app: AppTest) -> set[str]:
    """The names of the nodes the graph figure draws (its click targets carry them)."""
    fig = json.loads(app.get("plotly_chart")[0].proto.spec)
    return {n for tr in fig["data"] if tr.get("mode") == "markers" for n in tr.get("customdata") or [] if n}


@pytest.mark.slow
def test_resnet18_opens_with_its_repeated_blocks_collapsed_and_they_expand(at):
    """A small model draws every op (the toggle off); ResNet-18 (70 ops) opens with its basic
    blocks collapsed, one is expanded from the toolbar, and the toggle draws every op again."""
    (small,) = [t for t in at.toggle if t.label == "Collapse repeated blocks"]
    assert not small.value and small.disabled  # r18_stem repeats nothing
    home(at).selectbox(key="model_pick").set_value("resnet18").run()
    assert not at.exception, at.exception
    (toggle,) = [t for t in at.toggle if t.label == "Collapse repeated blocks"]
    assert toggle.value and not toggle.disabled
    collapsed = _drawn_nodes(at)
    blocks = sorted(n for n in collapsed if n.startswith("block "))
    assert len(blocks) >= 6 and "conv4" not in collapsed
    (opened,) = [m for m in at.multiselect if m.label == "Expanded blocks"]
    opened.set_value([blocks[0]]).run()
    some = _drawn_nodes(at)
    assert blocks[0] not in some and set(blocks[1:]) <= some and len(some) > len(collapsed)
    toggle.set_value(False).run()
    everything = _drawn_nodes(at)
    ops = {n.name for n in at.session_state["state"].graph.nodes}
    assert ops <= everything and not any(n.startswith("block ") for n in everything)
    assert len(collapsed) < 0.4 * len(ops)


@pytest.mark.slow
def test_a_measured_variant_is_named_after_its_whole_action_chain(at):
    preset_form(at)
    at.selectbox(key="preset_name").set_value("alt_tiled").run()
    at.button(key="apply_preset").click().run()
    at.switch_page("../pages/loops.py").run()
    at.button(key="measure").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = next(d.value for d in at.get("dataframe") if "action chain" in d.value.columns)
    steps = session(at).steps
    chain = table["action chain"].iloc[-1]
    assert len(steps) >= 1 and all(s.primitive in chain for s in steps), (chain, steps)
    assert table["variant"].iloc[-1] == "v1"  # short, for legends: the chain has a column of its own (#45)
