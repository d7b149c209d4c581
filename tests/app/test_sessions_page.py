"""AppTest tests of the Sessions page: save and open, bad names and oversized or pickled uploads
refused with nothing changed, replays queued across tabs, an uploaded ONNX model opened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import home, preset_form, session, start, upload_model


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


def test_an_uploaded_onnx_model_opens_as_a_new_session_pinned_to_its_file(at, monkeypatch):
    from tests.engine.models.frontend.test_import import _onnx
    from workbench.app import state as _state

    before = session(at).to_json()
    upload_model(monkeypatch, "mlp.onnx", _onnx()[:100])  # truncated: refused, nothing changes
    at.switch_page("../pages/sessions.py").run()
    at.button(key="import_model").click().run()
    assert len(at.error) == 1 and at.error[0].value.startswith("mlp.onnx: "), [e.value for e in at.error]
    assert session(at).to_json() == before

    upload_model(monkeypatch, "mlp.onnx", _onnx())
    at.button(key="import_model").click().run()
    assert not at.error, [e.value for e in at.error]
    model = session(at).model
    stored = Path(model["file"])
    assert stored.parent == _state.WORK_DIR / "models" and stored.read_bytes() == _onnx()
    assert model["inputs"] == {"x": [1, 8]} and session(at).steps == ()
    assert any(m.value.startswith("imported mlp.onnx: 2 ops") for m in at.success), [m.value for m in at.success]
    assert "file: " + stored.name in " ".join(c.value for c in at.caption)
