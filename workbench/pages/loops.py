"""Loops: schedule one fused kernel with TVM's loop primitives, read the loop nest before and
after, then build, verify and time the whole program; every measured variant is kept."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.engine.loops import PRIMITIVES, diff
from workbench.engine.step import Step
from workbench.engine.views import nest_view
from workbench.pages import _state

st.title("Loops")
state = _state.state()
plan = state.program.plan
_state.show_messages()

names = [k.name for k in plan.kernels]
kernel = st.selectbox("Fused kernel", names, index=names.index(state.home_kernel(_state.selected())),
                      key="loop_kernel",
                      format_func=lambda k: f"{k}  ({' → '.join(plan.kernels[names.index(k)].ops) or 'conversion'})")
view = nest_view(state, kernel)
blocks, loops = list(view.blocks), view.loops

with st.expander("Blocks and loops (outermost first)", expanded=True):
    st.dataframe(pd.DataFrame([{"block": b, "loop": lp.name, "extent": lp.extent, "kind": lp.kind,
                                "reduction": lp.reduction} for b in blocks for lp in loops[b]]),
                 hide_index=True, width="stretch", key="loop_table")

prim = st.selectbox("Loop primitive", list(PRIMITIVES), key="loop_prim", format_func=lambda p: f"{p}: {PRIMITIVES[p].doc}")
spec = PRIMITIVES[prim]
args: dict = {}
cols = st.columns(len(spec.args))
try:
    for col, (name, kind) in zip(cols, spec.args.items()):
        with col:
            owner = args.get(spec.loop_of, blocks[0])
            if kind == "block":
                args[name] = st.selectbox(name, blocks, key=f"la_{name}")
            elif kind == "loop":
                opts = [f"{lp.name}" for lp in loops.get(owner, [])]
                args[name] = st.selectbox(f"{name} of {owner}", opts, key=f"la_{name}",
                                          format_func=lambda n, o=owner: f"{n} ({next(l.extent for l in loops[o] if l.name == n)})")
            elif kind == "loops":
                args[name] = st.multiselect(f"{name} of {owner}", [lp.name for lp in loops.get(owner, [])],
                                            key=f"la_{name}")
            elif kind == "int":
                args[name] = int(st.number_input(name, 0, 64, int(spec.defaults.get(name, 0)), key=f"la_{name}"))
            elif kind == "ints":
                text = st.text_input(f"{name} (comma-separated; one may be null)", "null, 16", key=f"la_{name}")
                args[name] = [None if x.strip() in ("null", "None", "") else int(x) for x in text.split(",")]
            else:
                args[name] = st.text_input(name, str(spec.defaults.get(name, "")), key=f"la_{name}")
except ValueError as e:
    st.warning(f"{prim}: arguments must be integers or null ({e})")
    st.stop()

after = view.script


def _apply_loop() -> None:
    if _state.act(lambda s: s.push(Step.make("loop", kernel, prim, **args)),
                  f"{prim} applied to {kernel}"):
        st.session_state.setdefault("loop_before", {})[kernel] = after


st.button(f"Apply {prim}", key="apply_loop", type="primary", on_click=_apply_loop)

before = st.session_state.get("loop_before", {}).get(kernel, after)
shown = st.radio("Loop nest", ["side by side", "diff"], horizontal=True, key="nest_view")
if shown == "diff":
    st.code(diff(before, after) or "(no change yet)", language="diff")
else:
    left, right = st.columns(2)
    left.caption("before the last primitive")
    left.code(before, language="python")
    right.caption("after")
    right.code(after, language="python")

st.subheader("Build & measure")
if st.button("Build, verify and time the program", key="measure", type="primary"):
    _state.measure_current(state)
    st.rerun()
_state.show_measurements()
