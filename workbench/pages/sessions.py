"""Sessions: save, open (from ``sessions/`` or an upload), download, export as a MetaSchedule
tuning record, and replay headlessly as a job in a worker process (``tuning.jobs.worker``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.engine.models import zoo
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.session.export import export_zip
from workbench.engine.models.frontend import MAX_MODEL_MB, parse_input
from workbench.engine.session.session import MAX_SESSION_MB, dumps, list_sessions, load_state, loads_state, new_session, replay, safe_path, save
from workbench.engine.tuning.jobs.worker import Job, replay_job_spec, start_job
from workbench.engine.base.words import plural
from workbench.app import messages as _messages, state as _state
from workbench.app.expr_form import store_model

st.title("Sessions")
state = _state.state()
session = state.session
_messages.show_messages()
st.caption(f"Current session **{session.name}** on **{zoo.model_label(session.model, options=True)}**: "
           f"{plural(len(session.steps), 'action')}. "
           f"Session files live in `{_state.SESSIONS_DIR}`.")

save_col, open_col = st.columns(2)
with save_col:
    st.subheader("Save")
    # the field follows the open session: after an Open, an Import or a model switch it shows the
    # new session's name (Streamlit would keep what it showed), and what the user types stays
    if st.session_state.get("save_name_of") != _state.opened() or "save_name" not in st.session_state:
        st.session_state.save_name, st.session_state.save_name_of = session.name, _state.opened()
    name = st.text_input("Session name", key="save_name")
    if st.button("Save", icon=":material/save:", key="save", type="primary"):
        with _messages.attempt():
            pinned = state.renamed(name).pinned()  # as the file holds it: every kernel's schedule pinned
            path = save(pinned, safe_path(_state.SESSIONS_DIR, name))
            _state.open_session(pinned)
            _state.mark_saved()
            st.session_state.saved = {"session": _state.session().key(), "path": str(path)}
    if _state.current_revision(saved := st.session_state.get("saved")):
        st.success(f"saved to {saved['path']}")
    elif _state.unsaved():
        st.caption(f"{plural(_state.unsaved(), 'action')} not saved to a file yet (the tab autosaves them for a reload).")
    st.download_button("Download session JSON", dumps(state), file_name=f"{session.name}.json",
                       mime="application/json", key="download")

with open_col:
    st.subheader("Open")
    files = list_sessions(_state.SESSIONS_DIR)
    pick = st.selectbox("From the sessions folder", files, key="open_pick") if files else None
    if st.button("Open", icon=":material/folder_open:", key="open", disabled=pick is None):
        with _messages.attempt(f"{pick}: "):
            _state.open_session(load_state(safe_path(_state.SESSIONS_DIR, pick)), f"opened {pick}")
            _state.mark_saved()
    up = st.file_uploader(f"Or upload a session file (at most {MAX_SESSION_MB} MB)", type=["json"], key="upload",
                          max_upload_size=MAX_SESSION_MB)
    if up is not None and st.button("Open the uploaded file", key="open_upload"):
        with _messages.attempt(f"{up.name}: "):
            _state.open_session(loads_state(up.getvalue().decode("utf-8", errors="replace")), f"opened {up.name}")

st.subheader("Import a model")
st.caption("An ONNX file becomes a new session: batch norm folded into the convolutions, each operator mapped onto "
           "the workbench's library, the model's own weights. The file is kept under the work folder and pinned "
           "by its SHA-256, so a replay refuses a changed file. `.pt2` programs and Python factories import with "
           "`python -m workbench import` (loading them can run code). A `.expr` file holds expression ops, as the "
           "Graph page's New expression op form writes them.")
model_up = st.file_uploader(f"An ONNX file with its weights inside (at most {MAX_MODEL_MB} MB), or a .expr file",
                            type=["onnx", "expr"], key="model_upload", max_upload_size=MAX_MODEL_MB)
shapes = st.text_input("Input shapes, for inputs with dynamic dims (optional)", key="model_inputs",
                       placeholder="input=1,3,224,224 mask=1,128")
lost = _state.unsaved()
keep = not lost or st.checkbox(f"Discard this session's {plural(lost, 'unsaved action')}",
                                        key="import_discard")
if model_up is not None and st.button("Import the model", icon=":material/upload_file:", key="import_model",
                                      disabled=not keep):
    with _messages.attempt(f"{model_up.name}: "):
        inputs = dict(parse_input(t) for t in shapes.replace(";", " ").split())
        path = store_model(model_up.name, model_up.getvalue(), _state.WORK_DIR / "models")
        spec, graph = zoo.file_model(str(path), inputs)
        _state.open_session(replay(new_session(spec)),
                            f"imported {model_up.name}: {plural(len(graph.nodes), 'op')}, "
                            f"inputs {', '.join(f'{t} {tuple(graph.tensors[t].shape)}' for t in graph.inputs)}")

st.subheader("Export the tuning record")
st.caption("One MetaSchedule workload per kernel (its layout-transformed PrimFunc) with the kernel's schedule as "
           "its record, plus the session and a manifest: plain TVM applies it with `JSONDatabase` + `compile_tir`.")
if st.button("Export as a zip", key="export"):
    with st.spinner("replaying, building and timing the kernels for the records…"):
        try:
            st.session_state.export_zip = {"session": session.key(), "zip": export_zip(session)}
        except WorkbenchError as e:
            st.session_state.error = str(e)
            st.rerun()
if _state.current_revision(export := st.session_state.get("export_zip")):
    st.download_button("Download the tuning record (zip)", export["zip"], file_name=f"{session.name}-record.zip",
                       mime="application/zip", key="download_zip")
elif export:
    st.caption("The last export was of another revision of the session: export again for this one.")

st.subheader("Replay headlessly")
st.caption("Runs a replay job (`python -m workbench replay` in a worker process, in line with the tuning jobs) on "
           "the current session: it rebuilds the final kernels, checks them against the reference and writes "
           "kernels.so, program.py and report.json.")
owner, queue = _state.tab_jobs("replay", "replay_job")
replaying = (job := st.session_state.get("replay_job")) is not None and job.running()
go, halt = st.columns(2)
if go.button("Replay in a worker", icon=":material/play_arrow:", key="replay", disabled=replaying):
    with _messages.attempt():
        # the folder is named for the session and its revision (``replayed``)
        folder = _state.WORK_DIR / "replay" / owner / f"{session.name}-{session.key()}"
        st.session_state.replay_job = start_job(replay_job_spec(session), folder, owner=owner, queue=queue)
        st.session_state.replay_of = {"session": session.key(), "name": session.name,
                                      "model": zoo.model_label(session.model, options=True)}
if halt.button("Stop the replay", icon=":material/stop:", key="replay_stop", disabled=not replaying):
    with _messages.attempt():
        job.stop(owner=owner)


def replayed(job: Job) -> dict:
    """The session revision ``job`` replays: as recorded when it started, or (a job this tab took
    over from the queue) as its folder names it."""
    of = st.session_state.get("replay_of")
    if isinstance(of, dict) and job.dir.name == f"{of.get('name')}-{of.get('session')}":
        return of
    name, _, key = job.dir.name.rpartition("-")
    return {"session": key, "name": name}


@st.fragment(run_every=1.0)
def replay_status() -> None:
    with _messages.guard("the replay's status"):
        show_replay()


def show_replay() -> None:
    """The tab's replay job: its progress, then its report if it replayed the open session's
    current revision (else a line saying whose it was)."""
    job: Job | None = st.session_state.get("replay_job")
    if job is None:
        return
    status = job.status()
    of = replayed(job)
    whose = "" if _state.current_revision(of) else f" of {of['name']}" + (f" on {of['model']}" if "model" in of else "")
    if status.state in ("queued", "running"):
        st.info(f"replay{whose} {status} (worker pid {job.pid}; {queue.limit} job(s) at a time on this machine)…")
        return
    if whose:
        st.caption(f"The last replay was{whose} as it was then, not of the open session as it is now: replay again "
                   "for this one.")
        return
    report, out = job.replay_report(), job.dir / "out"
    if report is not None and report.ok:
        st.success(f"replay ok: outputs match the reference (max abs error {report.max_abs_error:.2e}), "
                   f"total {report.total_ms:.3f} ms; files in {out}")
        st.dataframe(pd.DataFrame(report.kernels), hide_index=True, width="stretch", key="replay_kernels")
    elif report is not None:
        st.error(f"replay done, but the outputs differ from the reference (max relative error "
                 f"{report.max_rel_error:.2e}); see {out / 'report.json'}")
    else:
        st.error(f"replay {str(status)[-800:]}")


replay_status()
