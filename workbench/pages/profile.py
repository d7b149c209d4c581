"""Profile: per-kernel latency of the measured variants, each kernel on the roofline of this
machine's measured ceilings, the cache profile of its loop nest (footprint per loop level,
estimated misses, hardware counters where the machine exposes them), and the tab's tuning runs
(layout parameters against latency, two runs side by side)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.engine.measure.ceilings import get_ceilings
from workbench.engine.measure.conversion_rates import conversion_rates
from workbench.engine.measure.counters import EVENTS
from workbench.engine.base import words
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.measure.roofline import program_points
from workbench.engine.session.session import list_sessions, load_state, safe_path
from workbench.engine.tuning.progress import read_progress, summarize_progress
from workbench.engine.session.kernel_views import cache_profile as kernel_cache_profile, state_counters
from workbench.app import measure_view as _measure, messages as _messages, state as _state
from workbench.viz.cache import footprint_figure, misses_figure
from workbench.viz.kernels import latency_bars_figure
from workbench.viz.legend import short_name
from workbench.viz.roofline import roofline_figure, roofline_table
from workbench.viz.tuning import layout_parameters_figure, layout_tasks, runs_figure

st.title("Profile")
state = _state.state()
session = state.session
_messages.show_messages()


@st.cache_resource(show_spinner="measuring this machine's ceilings (once per target)…")
def ceilings(target_json: str, refresh: int = 0):
    return get_ceilings(json.loads(target_json), refresh=bool(refresh))


@st.cache_resource(max_entries=32, show_spinner="computing the cache profile…")
def cache_profile(key: str, kernel: str, _state, _caches: tuple, line: int):
    return kernel_cache_profile(_state, kernel, dict(_caches), line)


c = ceilings(json.dumps(session.target, sort_keys=True), st.session_state.get("ceilings_refresh", 0))
a, b, d = st.columns(3)
a.metric("Peak (FMA kernel)", f"{c.peak_gflops:.0f} GFLOP/s")
b.metric("Bandwidth (triad)", f"{c.triad_gbs:.1f} GB/s")
d.metric("Ridge point", f"{c.ridge:.1f} FLOP/B")
st.caption(f"{c.cpu}; caches " + ", ".join(f"{k} {words.size(v)}" for k, v in c.caches.items())
           + f", {c.line_bytes} B lines; measured for `{json.dumps(c.target)}`" + (f". {c.note}" if c.note else ""))
if st.button("Re-measure the ceilings", key="ceilings_remeasure"):
    st.session_state.ceilings_refresh = st.session_state.get("ceilings_refresh", 0) + 1
    st.rerun()

st.subheader("Latency and roofline")
if st.button("Build, verify and time the current session", key="profile_measure", type="primary"):
    _measure.measure_current(state)
    st.rerun()
timings = _state.timings()
#: the roofline table's figures, narrow enough that its key columns stay in view
NUMBERS = {k: st.column_config.NumberColumn(format=f, width="small") for k, f in (
    ("latency ms", "%.4f"), ("GFLOP/s", "%.1f"), ("% of roof", "%.1f"), ("GFLOP", "%.3f"), ("MB", "%.2f"),
    ("FLOP/byte", "%.2f"), ("total ms", "%.4f"))}
if timings:
    chains = {v["variant"]: v.get("action chain", v["variant"]) for v in _state.variants()}
    # one above the other: each figure gets the page's width, its legend below it
    st.plotly_chart(roofline_figure(_state.roofline_points(), c, chains=chains), width="stretch", key="roofline")
    st.dataframe(pd.DataFrame(roofline_table(_state.roofline_points(), c)), hide_index=True, width="stretch",
                 key="roofline_table", row_height=_state.WRAPPED_ROWS, column_config=NUMBERS)
    st.caption("*% of roof*: the kernel's GFLOP/s over the roof at its arithmetic intensity, the lower of this "
               f"machine's FMA peak ({c.peak_gflops:.0f} GFLOP/s) and intensity x its STREAM bandwidth "
               f"({c.bandwidth_gbs:.1f} GB/s); *bound* says which of the two it is. Intensity counts compulsory "
               "traffic (each buffer read or written once).")
    if over := [p for p in _state.roofline_points() if p.roof_note(c)]:
        st.caption(f"{', '.join(dict.fromkeys(p.kernel for p in over))} above 100% of the roof, which is no error: see *note*. The roof drawn is DRAM's "
                   "(STREAM); a kernel whose buffers fit a cache (*buffers fit*) is timed warm, and this machine's "
                   "per-cache bandwidth is not measured.")
    st.plotly_chart(latency_bars_figure(timings, spreads=_state.spreads(), chains=chains), width="stretch",
                    key="latency_bars")
    st.dataframe(pd.DataFrame([{"variant": short_name(v["variant"]), "total ms": v.get("total_ms"),
                                "matches reference": v.get("matches_reference"), "action chain": chains[v["variant"]]}
                               for v in _state.variants()]), hide_index=True, width="stretch", key="variant_chains",
                 column_config=NUMBERS)
    last = st.session_state.get("last_measure")
    if last and _state.current_revision(last) and last["label"] in timings:
        rates = conversion_rates(state.scheduled_program(), timings[last["label"]], c.copy_gbs)
        if rates:
            st.markdown(f"**Layout conversions** of *{short_name(last['label'])}*: bytes read and written against this "
                        f"machine's STREAM copy ({c.copy_gbs:.1f} GB/s)")
            st.dataframe(pd.DataFrame([{"kernel": r.name, "MB": r.bytes / 1e6, "ms": r.latency_ms, "GB/s": r.gbs,
                                        "% of copy": r.percent_of_copy} for r in rates]).round(3),
                         hide_index=True, width="stretch", key="conversion_rates")
else:
    st.info("No variant measured yet: measure the current session here or on the Loops page; every measured "
            "variant shows on the bars and the roofline, so layouts and schedules compare on one chart.")
    pts = program_points(state.scheduled_program())
    st.dataframe(pd.DataFrame([{k: v for k, v in p.row(c).items() if k in ("kernel", "GFLOP", "MB", "FLOP/byte")}
                               for p in pts]), hide_index=True, width="stretch", key="intensity_table")

st.subheader("Cache profile")
kernels = [k.name for k in state.program.plan.kernels]
kernel = st.selectbox("Kernel", kernels, index=kernels.index(state.home_kernel(_state.selected())),
                      key="profile_kernel")
caches = tuple(c.caches.items())
prof = cache_profile(session.key(), kernel, state, caches, c.line_bytes)
st.plotly_chart(footprint_figure(prof), width="stretch", key="footprint")
st.dataframe(prof.table().round(3), hide_index=True, width="stretch", key="footprint_table")

files = list_sessions(_state.SESSIONS_DIR)
other = st.selectbox("Compare the estimated misses with a saved session", ["(none)"] + files, key="profile_compare")
profiles = {f"current ({session.name})": prof}
if other != "(none)":
    try:
        ost = load_state(safe_path(_state.SESSIONS_DIR, other))
        if kernel in ost.program.funcs:
            profiles[other] = cache_profile(f"file:{other}:{ost.session.key()}", kernel, ost, caches, c.line_bytes)
        else:
            st.warning(f"{other} has no kernel {kernel}")
    except WorkbenchError as err:
        st.warning(f"{other}: {err}")
st.plotly_chart(misses_figure(profiles), width="stretch", key="misses")
st.caption("Every estimate is at least the compulsory misses (each line the kernel touches, once) and no cache "
           "misses more than a smaller one; *bounded by* says where such a bound replaced the model's estimate.")
st.dataframe(pd.concat([p.misses_table().assign(variant=n) for n, p in profiles.items()]), hide_index=True,
             width="stretch", key="misses_table")

st.subheader("Hardware counters")
st.caption(f"{', '.join(EVENTS)} per call of the kernel, with Linux perf (the ALT paper's Table 3).")
if st.button("Read the counters of this kernel", key="counters"):
    with st.spinner("building and running the kernel under perf…"):
        try:
            got = state_counters(state, kernel)
        except WorkbenchError as err:
            st.session_state.error = str(err)
            st.rerun()
    if got.available:
        st.dataframe(pd.DataFrame([got.per_call]), hide_index=True, width="stretch", key="counters_table")
    else:
        st.info(f"Model only: {got.reason}")


st.subheader("Tuning runs")


def run_name(progress: Path) -> str:
    """A run (its folder ``{session}-{stage}-{revision}``) as ``session · stage · time of its last measurement``."""
    name, _, stage = re.sub(r"-[0-9a-f]{16}$", "", progress.parent.name).rpartition("-")
    return f"{name} · {stage} · {time.strftime('%H:%M:%S', time.localtime(progress.stat().st_mtime))}"


found = (_state.WORK_DIR / "tune" / st.session_state.wid).glob("*/progress.jsonl")
runs = {run_name(p): p for p in sorted(found, key=lambda p: -p.stat().st_mtime)}  # newest first
if not runs:
    st.info("No tuning run in this tab yet: the Tuning page starts one. Its layout candidates show here against "
            "their latency, and two runs side by side.")
else:
    a, b = st.columns(2)
    first = a.selectbox("Run", list(runs), key="profile_run")
    others = [n for n in runs if n != first]
    beside = b.selectbox("Beside it", ["(none)"] + others, index=1 if others else 0, key="profile_run_beside")
    rows = {n: read_progress(runs[n]) for n in (first, beside) if n in runs}
    st.plotly_chart(runs_figure(rows), width="stretch", key="runs_curves")
    bests = {n: {t["task"]: t["best ms"] for t in summarize_progress(r).rows()} for n, r in rows.items()}
    st.dataframe(pd.DataFrame(bests).rename_axis("best ms of task").reset_index(), hide_index=True, width="stretch",
                 key="runs_bests")
    if tasks := layout_tasks(rows[first]):
        task = st.selectbox("Layout candidates of", ([None] if len(tasks) > 1 else []) + tasks, key="profile_run_task",
                            format_func=lambda t: t or "every task (latency over its default layout's)")
        st.plotly_chart(layout_parameters_figure(rows[first], task), width="stretch", key="layout_parameters")
        st.caption("One line per layout candidate the joint stage scored; drag along an axis to keep a range.")
    else:
        st.caption(f"{first} scored no layout candidate with parameters (the joint stage scores them).")
