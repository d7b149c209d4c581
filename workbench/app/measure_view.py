"""The measured variants on a page: ``measure_current`` builds, verifies and times the current
session and keeps it as a variant (``state`` holds the variants), ``show_measurements`` shows the
last measurement and the table of the open model's variants side by side."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.timing import Stats, compare
from workbench.engine.base.words import action_chain
from workbench.engine.build.program import measure
from workbench.engine.measure.roofline import program_points
from workbench.engine.session.session import State
from workbench.app import state as _state

__all__ = ["measure_current", "show_measurements"]


def _label() -> str:
    """The variant's name: its number in the tab (any model's), short enough for a legend; its
    actions are the variants table's *action chain* and the figures' hover."""
    return f"v{len(st.session_state.variants) + 1}"


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
        label = _label()
        v, total, previous = m.verification, m.total, (_state.variants() or [None])[-1]
        noisy = any(t.stats.noisy for t in m.timings)
        vs = compare(total, Stats(previous["total_ms"], previous["total_min_ms"], previous["total_max_ms"],
                                  previous["repeats"])) if previous and "total_min_ms" in previous else ""
        st.session_state.variants.append({
            "variant": label, "model": _state.model_of(st_state.session), "session": st_state.session.key(),
            "actions": len(st_state.session.steps),
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
    _state.autosave()


def show_measurements() -> None:
    """The last measurement's figures and the comparison table of every variant."""
    res = st.session_state.get("last_measure")
    if res and not _state.current_revision(res):
        st.caption(f"The last measurement ({res['label']}) was of another revision of the session: measure "
                   "again to see this one's latency.")
    elif res:
        a, b, c = st.columns(3)
        a.metric(f"Program latency ({res['label']})", f"{res['total_ms']:.3f} ms", help="median of the kernels' "
                 "medians", delta=res.get("spread"), delta_color="off")
        b.metric("Max abs error", f"{res['err']:.2e}")
        c.metric("Check", "matches reference" if res["ok"] else "MISMATCH")
        st.dataframe(pd.DataFrame(res["kernels"]), hide_index=True, width="stretch", key="last_kernels")
    if _state.variants():
        st.markdown(f"**Variants of {_state.model_of(_state.session())} measured in this tab** (side by side)")
        table = pd.DataFrame(_state.variants()).drop(columns=["model", "session"],  # session: a bare hash
                                                     errors="ignore")
        st.dataframe(table[sorted(table, key=lambda c: c == "action chain")], hide_index=True,
                     width="stretch", key="variants", row_height=_state.WRAPPED_ROWS)  # the long chain last
