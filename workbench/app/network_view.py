"""The Graph page's time view: the whole network timed (``network_time``) behind a button, with
live status while it runs; the result is kept for the session state it timed, as JSON data (the
workspace keeps it across reloads: ``state.KEPT_RESULTS``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd
import streamlit as st

from workbench.engine.base.timing import Stats
from workbench.engine.session.network_time import Contender, KernelSpan, NetworkTime, time_network
from workbench.engine.session.session import State
from workbench.app import messages as _messages, state as _state
from workbench.viz.timeline import by_type_figure, contenders_figure, timeline_figure

__all__ = ["network_time_section", "show_network_time", "network_time_of"]


def network_time_of(data: dict[str, Any]) -> NetworkTime:
    """A ``NetworkTime`` from its kept form (``dataclasses.asdict``, read back from JSON)."""
    def stats(d: dict | None) -> Stats | None:
        return Stats(**d) if d else None

    return NetworkTime(data["model"], tuple(KernelSpan(**{**k, "ops": tuple(k["ops"]), "stats": stats(k["stats"])})
                                            for k in data["kernels"]), data["runs"],
                       tuple(Contender(**{**c, "stats": stats(c["stats"])}) for c in data["contenders"]))


def show_network_time(t: NetworkTime) -> None:
    """The network's latency beside the frameworks', where its time goes kernel by kernel and by
    op type, conversions against compute."""
    split = t.split()
    cols = st.columns(2 + len(t.contenders) - 1)
    cols[0].metric("The network (compiled)", f"{t.network.median_ms:.3f} ms",
                   help=f"min {t.network.min_ms:.3f} ms, max {t.network.max_ms:.3f} ms over {t.network.repeats} "
                        f"runs; checked against the reference (relative error {t.contenders[0].max_rel_error:.1e})")
    cols[1].metric("Conversions", f"{split['conversion']:.3f} ms",
                   help=f"compute kernels {split['compute']:.3f} ms, outside any kernel {split['outside kernels']:.3f} "
                        "ms (the VM's own work)")
    for col, c in zip(cols[2:], t.contenders[1:]):
        ratio = c.stats.median_ms / t.network.median_ms if c.stats else None
        col.metric(c.name, f"{c.stats.median_ms:.3f} ms" if c.stats else "could not run", help=c.note or None,
                   delta_color="off", delta=None if ratio is None else
                   f"ours {ratio:.2f}x faster" if ratio >= 1 else f"ours {1 / ratio:.2f}x slower")
    st.plotly_chart(timeline_figure(t), key="network_timeline", width="stretch")
    left, right = st.columns(2)
    left.plotly_chart(by_type_figure(t), key="network_by_type", width="stretch")
    right.plotly_chart(contenders_figure(t), key="network_contenders", width="stretch")
    st.dataframe(pd.DataFrame([{"contender": c.name, "median ms": c.stats.median_ms if c.stats else None,
                                "min ms": c.stats.min_ms if c.stats else None,
                                "max ms": c.stats.max_ms if c.stats else None,
                                "rel. error vs reference": c.max_rel_error, "note": c.note} for c in t.contenders]),
                 hide_index=True, key="network_contenders_table", width="stretch")
    st.caption(f"Kernels: medians of {t.runs} instrumented runs of the whole network, back to back in call order "
               f"(sum {t.kernels_ms:.3f} ms).")


def network_time_section(state: State) -> None:
    """The section's button, its live status while it runs, and the kept result of this session."""
    st.subheader("The network in time")
    st.caption("Builds the session as one network (what replay writes as `network.so`), checks it against the "
               "reference, then times it, its kernels as the network calls them and, for a model PyTorch or ONNX "
               "Runtime can run, those on the same input. It takes a few seconds.")
    if st.button("Time the network", key="time_network", icon=":material/timer:"):
        with st.status("timing the network…") as status:
            try:
                timed = time_network(state, say=lambda s: status.update(label=f"{s}…"))
            except Exception as e:  # noqa: BLE001 - one line, as every page's errors (st.rerun and st.stop pass)
                status.update(label="not timed", state="error")
                st.error(_messages.failure(e, "timing the network"), icon=":material/error:")
            else:
                st.session_state.network_time = {"session": state.session.key(), "result": asdict(timed)}
                status.update(label=f"the network: {timed.network.median_ms:.3f} ms", state="complete")
    if kept := st.session_state.get("network_time"):
        if _state.current_revision(kept):
            show_network_time(network_time_of(kept["result"]))
        else:
            st.caption("The last timing was of another session state: time the network again to see this one.")
