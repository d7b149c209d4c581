"""Everything the pages keep between reruns, in ``st.session_state`` (one browser tab each).

The session (a log of steps) is the single source of truth; the tab keeps its replayed
``State``, and a hand action applies one step to it (``State.push``): nothing is replayed, and
a rerun that changed nothing rebuilds nothing. Measurements of variants are kept apart from the
session: undoing an action does not forget what was measured.

Each tab is a workspace with an id in the URL (``?ws=...``): every change is autosaved
atomically (``engine.workspace``), and a reload of the page restores the session with its
measured variants. Results (measurements, exports, replays, tuning runs) remember the session
revision (``Session.key()``) they came from, so a page never shows one as the current one's.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from workbench.engine import zoo
from workbench.engine.errors import WorkbenchError
from workbench.engine.layout import PRIMITIVES as LAYOUT_PRIMITIVES
from workbench.engine.presets import PRESETS
from workbench.engine.program import measure
from workbench.engine.roofline import RooflinePoint, program_points
from workbench.engine.session import Session, State, new_session, replay
from workbench.engine.timing import Stats, compare
from workbench.engine.tuning.worker import JobQueue
from workbench.engine.words import action_chain, plural
from workbench.engine.workspace import load_workspace, new_workspace_id, save_workspace

ROOT = Path(__file__).resolve().parents[2]
SESSIONS_DIR = Path(os.environ.get("ALT_WORKBENCH_SESSIONS", ROOT / "sessions"))
WORK_DIR = Path(os.environ.get("ALT_WORKBENCH_WORK", ROOT / "work"))


def _autosave_dir() -> Path:
    return WORK_DIR / "autosave"


def init() -> None:
    """Create the tab's state once: the workspace of the URL's ``ws`` id when one was saved (a
    reload), else a fresh session on the default model."""
    ss = st.session_state
    if "state" in ss:
        return
    wid = st.query_params.get("ws")
    restored = load_workspace(_autosave_dir(), wid) if isinstance(wid, str) and wid else None
    if restored is None:
        wid = new_workspace_id()
        st.query_params["ws"] = wid
    data = restored.data if restored else {}
    ss.wid = wid
    ss.state = restored.state if restored else replay(new_session(zoo.DEFAULT_MODEL))
    ss.changed = set()       # tensors that took a layout in the last action (graph highlight)
    ss.selected = None       # the op clicked in the graph
    ss.variants = list(data.get("variants", []))   # measured variants: one dict each (the comparison table)
    ss.timings = dict(data.get("timings", {}))     # variant label -> {kernel: latency_ms}
    ss.spreads = dict(data.get("spreads", {}))     # variant label -> {kernel: [min_ms, max_ms, repeats]}
    ss.points = [RooflinePoint(**p) for p in data.get("points", [])]  # roofline points of the variants
    ss.saved_key = data.get("saved_key")           # the session revision last saved or opened from a file
    ss.last_action_ms = None
    if restored:
        s = ss.state.session
        ss.note = (f"restored this tab's work: session {s.name} ({plural(len(s.steps), 'action')}) and "
                   f"{plural(len(ss.variants), 'measured variant')}")


#: widgets whose values outlive a page switch (Streamlit drops the value of a widget its page
#: does not draw), with their first values; their pages create them with no value of their own
#: the row height (px) of tables with long text cells: above Streamlit's 4rem, its grid wraps a
#: cell's text instead of cutting it (3 lines fit)
WRAPPED_ROWS = 66

KEPT_WIDGETS: dict[str, Any] = {"tune_stage": "joint", "tune_budget": 32, "tune_fraction": 0.3, "tune_rpc": "",
                                 # the Layouts page draws its open tab alone: the other's choice waits
                                 "layout_prim": next(iter(LAYOUT_PRIMITIVES)), "preset_name": next(iter(PRESETS))}


def keep_widgets() -> None:
    """Re-assign the kept widgets' values (every run, before a page draws), so they survive."""
    ss = st.session_state
    for key, first in KEPT_WIDGETS.items():
        ss[key] = ss[key] if key in ss else first


def autosave() -> None:
    """Write the tab's workspace (session, redo stack, measurements) atomically."""
    ss = st.session_state
    save_workspace(_autosave_dir(), ss.wid, ss.state.session,
                   {"variants": ss.variants, "timings": ss.timings, "spreads": ss.spreads,
                    "points": [asdict(p) for p in ss.points],
                    "saved_key": ss.saved_key})


def mark_saved() -> None:
    """The current session revision is on disk (saved, or opened from a file)."""
    st.session_state.saved_key = session().key()
    autosave()


def unsaved() -> int:
    """How many actions would be lost by replacing the session (0 when it is saved)."""
    s = session()
    return 0 if s.key() == st.session_state.saved_key else len(s.steps)


def session() -> Session:
    init()
    return st.session_state.state.session


def state() -> State:
    """The tab's replayed session."""
    init()
    return st.session_state.state


def _origins(s: State) -> dict[str, str]:
    return {t: o.layout for t, o in s.program.plan.origins.items()}


@contextlib.contextmanager
def attempt(prefix: str = "", rerun: bool = True) -> Iterator[None]:
    """Run a button's work: a ``WorkbenchError`` it raises is shown at the top of the page (after
    ``prefix``) and changes nothing; then the script reruns to draw the result."""
    try:
        yield
    except WorkbenchError as e:  # a message that names its subject already is not prefixed twice
        st.session_state.error = str(e) if prefix and str(e).startswith(prefix) else f"{prefix}{e}"
    if rerun:
        st.rerun()


def tab_jobs(kind: str, key: str) -> tuple[str, JobQueue]:
    """The tab's owner id and the machine's job queue; a job of ``kind`` this tab started before
    a reload, still queued or running, is picked up again as ``st.session_state[key]``."""
    init()
    owner, queue = st.session_state.wid, JobQueue.at(WORK_DIR)
    if key not in st.session_state and (adopted := queue.job_of(owner, kind)):
        st.session_state[key] = adopted
    return owner, queue


def act(change: Callable[[State], State], note: str = "") -> bool:
    """Apply a change (``push``, ``undo``, ``redo``, ...) to the tab's state; a refused change
    leaves it as it was and the page shows the engine's message at its top. Meant for a
    button's ``on_click``: the callback runs before the script, so one run draws the result."""
    old = state()
    t0 = time.perf_counter()
    try:
        new = change(old)
        before, after = _origins(old), _origins(new)
    except WorkbenchError as e:
        st.session_state.error = str(e)
        return False
    st.session_state.pop("error", None)
    st.session_state.changed = {t for t, lay in after.items() if before.get(t) != lay}
    st.session_state.state = new
    st.session_state.last_action_ms = (time.perf_counter() - t0) * 1000
    if note:
        st.session_state.note = note
    autosave()
    return True


def show_messages() -> None:
    """The last action's note or refusal, once (they survive the rerun that follows a button)."""
    if msg := st.session_state.pop("error", None):
        st.error(msg, icon=":material/block:")
    if note := st.session_state.pop("note", None):
        st.success(note, icon=":material/check:")


def open_session(new: State, note: str = "") -> None:
    """Replace the tab's state (a model change, a file opened, a tuning result applied); the
    model shown follows the new session, and the note says when it changed. Measurements are
    kept."""
    init()
    old = zoo.model_label(session().model, options=True)
    st.session_state.state = new
    st.session_state.changed = set()
    st.session_state.selected = None
    st.session_state.pop("error", None)
    model = zoo.model_label(new.session.model, options=True)
    if model != old:
        note = (note + "; " if note else "") + f"the model is now {model} (was {old})"
    if note:
        st.session_state.note = note
    autosave()


def switch_model(model: str) -> None:
    """A fresh session on another zoo model (the page asked first when work was unsaved)."""
    open_session(replay(new_session(model)))


def current_revision(result: dict | None) -> bool:
    """Whether a kept result (a dict with a ``session`` key) came from the current session."""
    return bool(result) and result.get("session") == session().key()


def select(op: str | None) -> None:
    st.session_state.selected = op


def selected() -> str | None:
    init()
    return st.session_state.selected


def changed() -> Collection[str]:
    init()
    return st.session_state.changed


def _label(s: Session) -> str:
    """The variant's name: its number and its actions (the middle elided past 70 characters;
    the variants table has them all)."""
    return f"v{len(variants()) + 1}: " + action_chain(((a.target, a.primitive) for a in s.steps), 70)


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
        v, total, previous = m.verification, m.total, (variants() or [None])[-1]
        noisy = any(t.stats.noisy for t in m.timings)
        vs = compare(total, Stats(previous["total_ms"], previous["total_min_ms"], previous["total_max_ms"],
                                  previous["repeats"])) if previous and "total_min_ms" in previous else ""
        st.session_state.variants.append({
            "variant": label, "session": st_state.session.key(), "actions": len(st_state.session.steps),
            "action chain": action_chain((a.target, a.primitive) for a in st_state.session.steps),
            "total_ms": total.median_ms, "total_min_ms": total.min_ms, "total_max_ms": total.max_ms,
            "repeats": total.repeats, "noisy": "noisy" if noisy else "",
            "vs previous": vs,
            **{f"{t.name} ms": t.latency_ms for t in m.timings},
            "max_abs_error": v.max_abs_error, "max_rel_error": v.max_rel_error, "matches_reference": v.ok})
        st.session_state.timings[label] = {t.name: t.latency_ms for t in m.timings}
        st.session_state.spreads[label] = {t.name: [t.stats.min_ms, t.stats.max_ms, t.stats.repeats]
                                           for t in m.timings}
        st.session_state.points += program_points(prog, st.session_state.timings[label], label)
        st.session_state.last_measure = {
            "label": label, "session": st_state.session.key(), "ok": v.ok, "total_ms": m.total_ms,
            "err": v.max_abs_error, "spread": f"min {total.min_ms:.3f}, spread {total.max_ms - total.min_ms:.3f} ms "
                                              f"over {total.repeats} runs{', noisy' if noisy else ''}",
            "kernels": [t.row() for t in m.timings]}
        status.update(label=f"{label}: {m.total_ms:.3f} ms, "
                            f"{'matches the reference' if v.ok else 'DOES NOT match the reference'}", state="complete")
    autosave()


def show_measurements() -> None:
    """The last measurement's figures and the comparison table of every variant."""
    res = st.session_state.get("last_measure")
    if res and not current_revision(res):
        st.caption(f"The last measurement ({res['label']}) was of another revision of the session: measure "
                   "again to see this one's latency.")
    elif res:
        a, b, c = st.columns(3)
        a.metric(f"Program latency ({res['label']})", f"{res['total_ms']:.3f} ms", help="median of the kernels' "
                 "medians", delta=res.get("spread"), delta_color="off")
        b.metric("Max abs error", f"{res['err']:.2e}")
        c.metric("Check", "matches reference" if res["ok"] else "MISMATCH")
        st.dataframe(pd.DataFrame(res["kernels"]), hide_index=True, width="stretch", key="last_kernels")
    if variants():
        st.markdown("**Variants measured in this tab** (side by side)")
        st.dataframe(pd.DataFrame(variants()), hide_index=True, width="stretch", key="variants",
                     row_height=WRAPPED_ROWS)


def roofline_points() -> list:
    init()
    return st.session_state.points


def variants() -> list[dict[str, Any]]:
    init()
    return st.session_state.variants


def timings() -> dict[str, dict[str, float]]:
    init()
    return st.session_state.timings


def spreads() -> dict[str, dict[str, list]]:
    """Each measured variant's per-kernel (min, max, repeats), beside ``timings``' medians."""
    init()
    return st.session_state.spreads

