"""Everything the pages keep between reruns, in ``st.session_state`` (one browser tab each).

The session (a log of steps) is the single source of truth; the tab keeps its replayed
``State``, and a hand action applies one step to it (``act``; ``previewed`` reuses the push a
page's preview made). Measured variants are kept apart from the session: an undo keeps them.

Each tab is a workspace with an id in the URL (``?ws=...``): every change is autosaved
atomically (``engine.session.workspace``), and a reload, a new tab on the same URL or a server
restart restores the session, its variants, the kept results (``KEPT_RESULTS``: jobs as their
folders) and the kept widget values. A result remembers the session revision
(``Session.key()``) it came from; those of another model are put away when the model changes.
Drawing lives elsewhere: ``messages`` (errors, notes), ``measure_view`` and the pages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from dataclasses import asdict
from pathlib import Path
from typing import Any

import streamlit as st

from workbench.engine.models import zoo
from workbench.engine.layout.primitives import PRIMITIVES as LAYOUT_PRIMITIVES
from workbench.engine.layout.presets import PRESETS
from workbench.engine.measure.roofline import RooflinePoint
from workbench.engine.session.session import Session, State, new_session, replay
from workbench.engine.base.step import Step
from workbench.engine.tuning.jobs.worker import Job, JobQueue
from workbench.engine.base.words import plural
from workbench.engine.session.workspace import load_workspace, new_workspace_id, save_workspace
from workbench.app.messages import failure
from workbench.app.paths import ROOT, SESSIONS_DIR, WORK_DIR  # noqa: F401 - the pages' (and tests') names for them

#: results the pages keep in ``st.session_state`` that the workspace file keeps too: the last
#: measurement, the tab's tuning job (with the session revision it started from, the kernels it
#: tunes, the state it was last seen in) and replay job (with the revision it replays), the last
#: save, the network's timing. A job is kept as its folder, where its progress, curves and result are.
KEPT_RESULTS = ("last_measure", "tune_job", "tune_base", "tune_tasks", "tune_seen", "replay_job", "replay_of", "saved",
                "network_time")
#: what pages remember about the open session only (the nest before the last loop action, a loop
#: form's starting arguments, a clicked row, the graph's expanded kernels): forgotten when
#: another session opens
SESSION_MEMOS = ("loop_before", "loop_seeded", "loop_defaults", "loop_picked", "graph_expanded", "graph_search_pick")


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
    data = restored.data if restored else {}
    ss.wid = wid
    ss.fresh_run = restored is None  # until this first run ends (``fresh_tab``)
    keep_url()
    ss.state = restored.state if restored else replay(new_session(zoo.DEFAULT_MODEL))
    ss.changed = set()       # tensors that took a layout in the last action (graph highlight)
    ss.selected = None       # the op clicked in the graph
    ss.variants = list(data.get("variants", []))   # measured variants: one dict each (the comparison table)
    ss.timings = dict(data.get("timings", {}))     # variant label -> {kernel: latency_ms}
    ss.spreads = dict(data.get("spreads", {}))     # variant label -> {kernel: [min_ms, max_ms, repeats]}
    ss.points = [RooflinePoint(**p) for p in data.get("points", [])]  # roofline points of the variants
    ss.saved_key = data.get("saved_key")           # the session revision last saved or opened from a file
    ss.last_action_ms = None
    ss.opened = 0                                   # sessions opened in this tab (a name field follows them)
    ss.kept_widgets = {**KEPT_WIDGETS, **{k: v for k, v in data.get("widgets", {}).items() if k in KEPT_WIDGETS}}
    for key, value in data.get("results", {}).items():
        if key in KEPT_RESULTS and (value := _restored(value, wid)) is not None:
            ss[key] = value
    if restored:
        s = ss.state.session
        ss.note = (f"restored this tab's work: session {s.name} ({plural(len(s.steps), 'action')}), "
                   f"{plural(len(ss.variants), 'measured variant')}"
                   + (", the last tuning run" if "tune_job" in ss else ""))


def fresh_tab() -> bool:
    """Whether this is the first run of a tab on a fresh session (what a new tab shows)."""
    return bool(st.session_state.get("fresh_run"))


def end_run() -> None:
    """After every run: autosave the tab's work; the tab's first run is over."""
    st.session_state.fresh_run = False
    autosave()


#: the row height (px) of tables with long text cells: above Streamlit's 4rem, its grid wraps a
#: cell's text instead of cutting it (3 lines fit)
WRAPPED_ROWS = 66

#: widgets whose values outlive a page switch (Streamlit drops the value of a widget its page
#: does not draw) and a reload (the workspace keeps them), with their first values; their pages
#: create them with no value of their own
KEPT_WIDGETS: dict[str, Any] = {"tune_stage": "joint", "tune_budget": 32, "tune_fraction": 0.3, "tune_rpc": "",
                                 # the Layouts page draws its open tab alone: the other's choice waits
                                 "layout_prim": next(iter(LAYOUT_PRIMITIVES)), "preset_name": next(iter(PRESETS))}


def keep_widgets(page: str | None = None) -> None:
    """Re-assign the kept widgets' values (every run, before a page draws them), so they survive.
    Their values are kept in ``kept_widgets`` too: a page switch (``page`` is not the last run's)
    drops the old page's widget values before the new page's run starts, and
    ``st.session_state`` then shows values from before the user's last change. ``page`` is None
    for a call later in the same run."""
    ss = st.session_state
    kept = ss.setdefault("kept_widgets", dict(KEPT_WIDGETS))
    switched = page is not None and ss.get("kept_page") != page
    if page is not None:
        ss.kept_page = page
    for key in KEPT_WIDGETS:
        if key in ss and not switched:
            kept[key] = ss[key]
        ss[key] = kept.get(key, KEPT_WIDGETS[key])


def keep_url() -> None:
    """Put the tab's workspace id (back) in the URL: a page switch in the sidebar drops the query,
    and a reload must find the id."""
    if st.query_params.get("ws") != st.session_state.wid:
        st.query_params["ws"] = st.session_state.wid


def _kept(value: Any) -> Any:
    """A kept result as JSON data: a job as its folder, a tuple marked as one; None for what is
    not JSON data (such as a test's stand-in for a job)."""
    if isinstance(value, Job):
        return {"job": str(value.dir)}
    if isinstance(value, tuple):
        value = {"tuple": list(value)}
    try:
        json.dumps(value, default=lambda x: x.item())  # NumPy scalars are numbers (save_workspace)
    except (TypeError, ValueError, AttributeError):
        return None
    return value


def _restored(value: Any, wid: str) -> Any:
    """``_kept``'s inverse; None for a job whose folder is gone or that is not this tab's."""
    if isinstance(value, dict) and set(value) == {"job"}:
        job = Job.attach(Path(value["job"]))
        return job if job is not None and job.owner == wid else None
    if isinstance(value, dict) and set(value) == {"tuple"}:
        return tuple(value["tuple"])
    return value


def autosave() -> None:
    """Write the tab's workspace (session, redo stack, measurements, kept results and widgets)
    atomically when it changed since the last write; called after every run of the app, and
    by the changes that must not wait for the run's end."""
    ss = st.session_state
    if "state" not in ss:
        return
    kept = {k: _kept(ss[k]) for k in KEPT_RESULTS if k in ss}
    data = {"variants": ss.variants, "timings": ss.timings, "spreads": ss.spreads,
            "points": [asdict(p) for p in ss.points], "saved_key": ss.saved_key,
            "widgets": dict(ss.get("kept_widgets", {})),
            "results": {k: v for k, v in kept.items() if v is not None}}
    try:
        ss.autosaved = save_workspace(_autosave_dir(), ss.wid, ss.state.session, data, unless=ss.get("autosaved"))
    except OSError as e:
        ss.error = f"this tab's work could not be saved in {_autosave_dir()}: {e}; free some space there or save " \
                   "the session on the Sessions page"


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


def tab_jobs(kind: str, key: str) -> tuple[str, JobQueue]:
    """The tab's owner id and the machine's job queue. The tab's last job of ``kind`` is
    ``st.session_state[key]`` (the workspace keeps it across reloads); a live one of this
    workspace that the tab does not hold (started by another tab on the same URL) replaces it."""
    init()
    ss = st.session_state
    owner, queue = ss.wid, JobQueue.at(WORK_DIR)
    held = ss.get(key)
    if not (isinstance(held, Job) and held.running()) and (live := queue.job_of(owner, kind)) is not None:
        if held is None or held.dir != live.dir:
            ss[key] = live
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
    except Exception as e:  # noqa: BLE001 - see messages.guard
        st.session_state.error = failure(e)
        return False
    st.session_state.pop("error", None)
    st.session_state.changed = {t for t, lay in after.items() if before.get(t) != lay}
    st.session_state.state = new
    st.session_state.last_action_ms = (time.perf_counter() - t0) * 1000
    if note:
        st.session_state.note = note
    autosave()
    return True


def previewed(base: State, step: Step, pushed: State) -> Callable[[State], State]:
    """The change ``act`` makes for an Apply whose result a page previewed: ``pushed`` itself
    (``base.push(step)``, done once), unless the tab's state is no longer ``base``."""
    return lambda s: pushed if s is base else s.push(step)


def open_session(new: State, note: str = "") -> None:
    """Replace the tab's state (a model change, a file opened, a session saved under a new
    name); the model shown follows the new session, and the note says when it changed.
    Measurements are kept (the pages show the open model's); the other results of another model
    are put away, except a job still running."""
    init()
    ss = st.session_state
    old = zoo.model_label(session().model, options=True)
    ss.state = new
    ss.changed = set()
    ss.selected = None
    ss.opened = ss.get("opened", 0) + 1
    ss.pop("error", None)
    for key in SESSION_MEMOS:
        ss.pop(key, None)
    model = zoo.model_label(new.session.model, options=True)
    if model != old:
        note = (note + "; " if note else "") + f"the model is now {model} (was {old})"
        for key in (*KEPT_RESULTS, "export_zip"):
            if not (isinstance(job := ss.get(key), Job) and job.running()):
                ss.pop(key, None)
    if note:
        ss.note = note
    autosave()


def opened() -> int:
    """How many sessions this tab has opened (a model switch, a file, an import, a save as): a
    field that shows the open session's name starts again from it when this changes."""
    init()
    return st.session_state.get("opened", 0)


def switch_model(model: str) -> bool:
    """A fresh session on another zoo model (the page asked first when work was unsaved). A model
    that fails to build changes nothing: the message says so, and picking it again retries."""
    old = zoo.model_label(session().model)
    try:
        new = replay(new_session(model))
    except Exception as e:  # noqa: BLE001 - see messages.guard
        st.session_state.error = failure(e, f"{model} could not be opened",
                                         f"the session on {old} is unchanged; pick {model} again to retry")
        st.session_state.pop("model_shown", None)  # the picker shows the open model again
        return False
    if st.session_state.get("model_pick", model) != model:
        return False  # picked over while it was built: the run of the newer pick opens that one
    open_session(new)
    return True


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


def model_of(s: Session) -> str:
    """The session's model as the pages name it (with its options)."""
    return zoo.model_label(s.model, options=True)


def _elsewhere() -> set[str]:
    """The labels of the variants measured on another model than the open one."""
    model = model_of(session())
    return {v["variant"] for v in st.session_state.variants if v.get("model", model) != model}


def roofline_points() -> list:
    """The roofline points of the open model's measured variants."""
    other = _elsewhere()
    return [p for p in st.session_state.points if p.variant not in other]


def variants() -> list[dict[str, Any]]:
    """The variants of the open model measured in this tab (those of another model come back with
    it; a variant restored from before models were recorded counts as the open model's)."""
    other = _elsewhere()
    return [v for v in st.session_state.variants if v["variant"] not in other]


def timings() -> dict[str, dict[str, float]]:
    """Each of the open model's measured variants' per-kernel median latency (ms)."""
    other = _elsewhere()
    return {k: v for k, v in st.session_state.timings.items() if k not in other}


def spreads() -> dict[str, dict[str, list]]:
    """Each measured variant's per-kernel (min, max, repeats), beside ``timings``' medians."""
    other = _elsewhere()
    return {k: v for k, v in st.session_state.spreads.items() if k not in other}

