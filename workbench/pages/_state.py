"""Everything the pages keep between reruns, in ``st.session_state`` (one browser tab each).

The session (an action log) is the single source of truth; the replayed ``State`` is cached
per session content, so a rerun that changed nothing rebuilds nothing. Measurements of
variants are kept apart from the session: undoing an action does not forget what was measured.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from workbench.engine import zoo
from workbench.engine.ceilings import cpu_name
from workbench.engine.errors import WorkbenchError
from workbench.engine.program import measure
from workbench.engine.roofline import program_points
from workbench.engine.session import Session, State, new_session, replay

ROOT = Path(__file__).resolve().parents[2]
SESSIONS_DIR = Path(os.environ.get("ALT_WORKBENCH_SESSIONS", ROOT / "sessions"))
WORK_DIR = Path(os.environ.get("ALT_WORKBENCH_WORK", ROOT / "work"))


def init() -> None:
    """Create the tab's state once: a fresh session on the default model."""
    ss = st.session_state
    if "session" not in ss:
        ss.session = new_session(zoo.DEFAULT_MODEL)
        ss.changed = set()       # tensors that took a layout in the last action (graph highlight)
        ss.selected = None       # the op clicked in the graph
        ss.variants = []         # measured variants: one dict each (the comparison table)
        ss.timings = {}          # variant label -> {kernel: latency_ms}
        ss.points = []           # roofline points of the measured variants
        ss.last_action_ms = None


def session() -> Session:
    init()
    return st.session_state.session


@st.cache_resource(max_entries=24, show_spinner=False)
def _replayed(key: str, _session: Session) -> State:
    return replay(_session)


def state() -> State:
    """The replayed session (cached by content)."""
    s = session()
    return _replayed(s.key(), s)


def _origins(s: Session) -> dict[str, str]:
    return {t: o.layout for t, o in _replayed(s.key(), s).program.plan.origins.items()}


def set_session(new: Session, note: str = "") -> None:
    """Make ``new`` current and remember which tensors' layouts it changed."""
    old = session()
    t0 = time.perf_counter()
    before, after = _origins(old), _origins(new)
    st.session_state.changed = {t for t, lay in after.items() if before.get(t) != lay}
    st.session_state.session = new
    st.session_state.last_action_ms = (time.perf_counter() - t0) * 1000
    if note:
        st.session_state.note = note


def act(change: Callable[[Session], Session], note: str = "") -> bool:
    """Apply a change (push, undo, redo, ...); a refused change leaves the session as it was and
    the page shows the engine's message at its top. Meant for a button's ``on_click``: the
    callback runs before the script, so one run draws the result."""
    try:
        new = change(session())
        _replayed(new.key(), new)
    except WorkbenchError as e:
        st.session_state.error = str(e)
        return False
    st.session_state.pop("error", None)
    set_session(new, note)
    return True


def show_messages() -> None:
    """The last action's note or refusal, once (they survive the rerun that follows a button)."""
    if msg := st.session_state.pop("error", None):
        st.error(msg, icon=":material/block:")
    if note := st.session_state.pop("note", None):
        st.success(note, icon=":material/check:")


def open_session(new: Session) -> None:
    """Replace the session (a model change, or a file opened); measurements are kept."""
    st.session_state.session = new
    st.session_state.changed = set()
    st.session_state.selected = None
    st.session_state.pop("error", None)


def select(op: str | None) -> None:
    st.session_state.selected = op


def selected() -> str | None:
    init()
    return st.session_state.selected


def changed() -> Collection[str]:
    init()
    return st.session_state.changed


def _label(s: Session) -> str:
    last = s.actions[-1] if s.actions else None
    what = (f"{last.get('preset') or last.get('primitive') or 'tuned'} on {last.get('tensor') or last.get('op')}"
            if last else "default")
    return f"v{len(variants()) + 1}: {what}"


def measure_current(st_state: State) -> None:
    """Build, verify and time the current session; keep it as a variant (table, bars, roofline)."""
    with st.status("building with LLVM, verifying against the reference, timing each kernel…") as status:
        try:
            prog = st_state.scheduled_program()
            m = measure(prog, st_state.session.target)
        except WorkbenchError as e:
            status.update(label="build failed", state="error")
            st.session_state.error = str(e)
            return
        label = _label(st_state.session)
        v = m.verification
        st.session_state.variants.append({
            "variant": label, "session": st_state.session.key(), "actions": len(st_state.session.actions),
            "total_ms": m.total_ms, **{f"{t.name} ms": t.latency_ms for t in m.timings},
            "max_abs_error": v.max_abs_error, "max_rel_error": v.max_rel_error, "matches_reference": v.ok})
        st.session_state.timings[label] = {t.name: t.latency_ms for t in m.timings}
        st.session_state.points += program_points(prog, st.session_state.timings[label], label)
        st.session_state.last_measure = {
            "label": label, "ok": v.ok, "total_ms": m.total_ms, "err": v.max_abs_error,
            "kernels": [{"kernel": t.name, "latency ms": t.latency_ms, "spread ms": t.spread_ms, "GFLOP/s": t.gflops}
                        for t in m.timings]}
        status.update(label=f"{label}: {m.total_ms:.3f} ms, "
                            f"{'matches the reference' if v.ok else 'DOES NOT match the reference'}", state="complete")


def show_measurements() -> None:
    """The last measurement's figures and the comparison table of every variant."""
    if res := st.session_state.get("last_measure"):
        a, b, c = st.columns(3)
        a.metric(f"Program latency ({res['label']})", f"{res['total_ms']:.3f} ms")
        b.metric("Max abs error", f"{res['err']:.2e}")
        c.metric("Check", "matches reference" if res["ok"] else "MISMATCH")
        st.dataframe(pd.DataFrame(res["kernels"]), hide_index=True, width="stretch", key="last_kernels")
    if variants():
        st.markdown("**Variants measured in this tab** (side by side)")
        st.dataframe(pd.DataFrame(variants()), hide_index=True, width="stretch", key="variants")


def roofline_points() -> list:
    init()
    return st.session_state.points


def variants() -> list[dict[str, Any]]:
    init()
    return st.session_state.variants


def timings() -> dict[str, dict[str, float]]:
    init()
    return st.session_state.timings


@st.cache_data(show_spinner=False)
def host_cpu() -> str:
    """The CPU model, for the target line in the sidebar."""
    return cpu_name()
