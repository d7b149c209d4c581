"""Sessions: save, open (from ``sessions/`` or an upload), download, export as a MetaSchedule
tuning record, and replay headlessly in a worker process (``python -m workbench replay``)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.engine.errors import WorkbenchError
from workbench.engine.export import export_session
from workbench.engine.session import dumps, load, loads, safe_path, save
from workbench.pages import _state

st.title("Sessions")
session = _state.session()
_state.show_messages()
st.caption(f"Current session **{session.name}** on `{session.model}`: {len(session.actions)} actions. "
           f"Session files live in `{_state.SESSIONS_DIR}`.")

save_col, open_col = st.columns(2)
with save_col:
    st.subheader("Save")
    name = st.text_input("Session name", session.name, key="save_name")
    if st.button("Save", icon=":material/save:", key="save", type="primary"):
        try:
            path = save(replace(session, name=name), safe_path(_state.SESSIONS_DIR, name))
            _state.open_session(replace(session, name=name))
            st.session_state.saved = str(path)
        except WorkbenchError as e:
            st.session_state.error = str(e)
        st.rerun()
    if saved := st.session_state.get("saved"):
        st.success(f"saved to {saved}")
    st.download_button("Download session JSON", dumps(session), file_name=f"{session.name}.json",
                       mime="application/json", key="download")

with open_col:
    st.subheader("Open")
    files = sorted(p.stem for p in _state.SESSIONS_DIR.glob("*.json"))
    pick = st.selectbox("From the sessions folder", files, key="open_pick") if files else None
    if st.button("Open", icon=":material/folder_open:", key="open", disabled=pick is None):
        try:
            _state.open_session(load(safe_path(_state.SESSIONS_DIR, pick)))
            st.session_state.pop("saved", None)
        except WorkbenchError as e:
            st.session_state.error = f"{pick}: {e}"
        st.rerun()
    up = st.file_uploader("Or upload a session file", type=["json"], key="upload")
    if up is not None and st.button("Open the uploaded file", key="open_upload"):
        try:
            _state.open_session(loads(up.getvalue().decode("utf-8", errors="replace")))
        except WorkbenchError as e:
            st.session_state.error = f"{up.name}: {e}"
        st.rerun()

st.subheader("Export the tuning record")
st.caption("One MetaSchedule workload per kernel (its layout-transformed PrimFunc) with the kernel's schedule as "
           "its record, plus the session and a manifest: plain TVM applies it with `JSONDatabase` + `compile_tir`.")
if st.button("Export as a zip", key="export"):
    with st.spinner("replaying, building and timing the kernels for the records…"):
        try:
            with tempfile.TemporaryDirectory() as tmp:
                out = export_session(session, Path(tmp) / session.name)
                buf = io.BytesIO()
                with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                    for f in sorted(out.rglob("*")):
                        if f.is_file():
                            z.write(f, f.relative_to(out.parent))
                st.session_state.export_zip = buf.getvalue()
        except WorkbenchError as e:
            st.session_state.error = str(e)
            st.rerun()
if data := st.session_state.get("export_zip"):
    st.download_button("Download the tuning record (zip)", data, file_name=f"{session.name}-record.zip",
                       mime="application/zip", key="download_zip")

st.subheader("Replay headlessly")
st.caption("Runs `python -m workbench replay` in a worker process on the current session: it rebuilds the final "
           "kernels, checks them against the reference and writes kernels.so, program.py and report.json.")
if st.button("Replay in a worker", icon=":material/play_arrow:", key="replay"):
    work = _state.WORK_DIR / "replay" / f"{session.name}-{session.key()}"
    work.mkdir(parents=True, exist_ok=True)
    save(session, work / "session.json")
    with open(work / "replay.log", "w") as log:  # the worker keeps its own copy of the handle
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "replay", str(work / "session.json"), "--out",
                                 str(work / "out")], cwd=_state.ROOT, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    st.session_state.replay_job = (proc, work)


@st.fragment(run_every=1.0)
def replay_status() -> None:
    job = st.session_state.get("replay_job")
    if job is None:
        return
    proc, work = job
    if proc.poll() is None:
        st.info(f"replaying in worker pid {proc.pid}…")
        return
    report = work / "out" / "report.json"
    if proc.returncode == 0 and report.exists():
        r = json.loads(report.read_text())
        st.success(f"replay ok: outputs match the reference (max abs error {r['max_abs_error']:.2e}), "
                   f"total {r['total_ms']:.3f} ms; files in {work / 'out'}")
        st.dataframe(pd.DataFrame(r["kernels"]), hide_index=True, width="stretch", key="replay_kernels")
    else:
        st.error(f"replay failed (exit {proc.returncode}): {(work / 'replay.log').read_text()[-800:]}")


replay_status()
