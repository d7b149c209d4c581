"""Graph: the model under the current layouts, what the last action changed, and why."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.pages import _state
from workbench.viz.graph import graph_figure

st.title("Computational graph")
state = _state.state()
plan = state.program.plan
changed = _state.changed()
st.caption(f"**{state.graph.name}**: {len(state.graph.nodes)} ops, {len(plan.kernels)} kernels, "
           f"{len(plan.conversions)} conversion ops. Click an op to select it for the other pages.")
_state.show_messages()

event = st.plotly_chart(graph_figure(state.graph, plan, changed=changed, selected=_state.selected()),
                        key="graph_chart", on_select="rerun", selection_mode="points", width="stretch")
points = (event or {}).get("selection", {}).get("points", []) if event else []
clicked = next((p.get("customdata") for p in points if p.get("customdata") in {n.name for n in state.graph.nodes}), None)
if clicked and clicked != _state.selected():
    _state.select(clicked)
    st.rerun()

if op := _state.selected():
    node = state.graph.node(op)
    st.info(f"Selected **{op}** ({node.label}, {node.kind}): output {list(state.graph.tensor(op).shape)} "
            f"stored as [{plan.layout_of(op).label}]")

report = pd.DataFrame(plan.report())
if changed:
    st.markdown(f"**Last action** changed the layout of: {', '.join(sorted(changed))}")
    report.insert(0, "changed", report["tensor"].isin(changed))
st.subheader("Propagation report")
st.dataframe(report, width="stretch", hide_index=True, key="report")
st.subheader("Kernels")
st.dataframe(pd.DataFrame([{"kernel": k.name, "ops": ", ".join(k.ops) or "(conversion)",
                            "reads": ", ".join(k.inputs), "writes": ", ".join(k.outputs),
                            "GFLOP": state.program.flops.get(k.name, 0) / 1e9} for k in plan.kernels]),
             width="stretch", hide_index=True, key="kernels")
