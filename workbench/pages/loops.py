"""Loops: schedule one fused kernel with TVM's loop primitives, read the loop nest before and
after, then build, verify and time the whole program; every measured variant is kept."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.engine.errors import WorkbenchError
from workbench.engine.loops import PRIMITIVES, diff, list_blocks, list_loops, script
from workbench.engine.program import measure
from workbench.pages import _state

st.title("Loops")
state = _state.state()
plan = state.program.plan
_state.show_messages()

names = [k.name for k in plan.kernels]
sel = _state.selected()
home = next((k.name for k in plan.kernels if sel in k.ops), None) or next(
    (k.name for k in plan.kernels if k.ops and state.graph.node(k.head).kind == "complex"), names[0])
kernel = st.selectbox("Fused kernel", names, index=names.index(home), key="loop_kernel",
                      format_func=lambda k: f"{k}  ({' → '.join(plan.kernels[names.index(k)].ops) or 'conversion'})")
func = state.scheduled(kernel)
blocks = list_blocks(func)
loops = {b: list_loops(func, b) for b in blocks}

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

after = script(func)


def _apply_loop() -> None:
    if _state.act(lambda s: s.push({"kind": "loop", "op": kernel, "primitive": prim, "args": args}),
                  f"{prim} applied to {kernel}"):
        st.session_state.setdefault("loop_before", {})[kernel] = after


st.button(f"Apply {prim}", key="apply_loop", type="primary", on_click=_apply_loop)

before = st.session_state.get("loop_before", {}).get(kernel, after)
view = st.radio("Loop nest", ["side by side", "diff"], horizontal=True, key="nest_view")
if view == "diff":
    st.code(diff(before, after) or "(no change yet)", language="diff")
else:
    left, right = st.columns(2)
    left.caption("before the last primitive")
    left.code(before, language="python")
    right.caption("after")
    right.code(after, language="python")

st.subheader("Build & measure")
if st.button("Build, verify and time the program", key="measure", type="primary"):
    with st.status("building with LLVM, verifying against the reference, timing each kernel…") as status:
        try:
            m = measure(state.scheduled_program(), state.session.target)
        except WorkbenchError as e:
            status.update(label="build failed", state="error")
            st.session_state.error = str(e)
            st.rerun()
        n = len(_state.variants()) + 1
        last = state.session.actions[-1] if state.session.actions else None
        what = (f"{last.get('preset') or last.get('primitive') or 'tuned'} on {last.get('tensor') or last.get('op')}"
                if last else "default")
        label = f"v{n}: {what}"
        kt = {t.name: t for t in m.timings}
        _state.record_variant({
            "variant": label, "session": state.session.key(), "actions": len(state.session.actions),
            "total_ms": m.total_ms, f"{kernel}_ms": kt[kernel].latency_ms, "GFLOP/s": kt[kernel].gflops,
            "max_abs_error": m.verification.max_abs_error, "max_rel_error": m.verification.max_rel_error,
            "matches_reference": m.verification.ok}, {t.name: t.latency_ms for t in m.timings})
        status.update(label=f"{label}: {m.total_ms:.3f} ms, "
                            f"{'matches the reference' if m.verification.ok else 'DOES NOT match the reference'}",
                      state="complete")
    st.session_state.last_measure = {"label": label, "ok": m.verification.ok, "total_ms": m.total_ms,
                                     "err": m.verification.max_abs_error,
                                     "kernels": [{"kernel": t.name, "latency_ms": t.latency_ms, "spread_ms": t.spread_ms,
                                                  "GFLOP/s": t.gflops} for t in m.timings]}

if res := st.session_state.get("last_measure"):
    a, b, c = st.columns(3)
    a.metric("Program latency", f"{res['total_ms']:.3f} ms")
    b.metric("Max abs error", f"{res['err']:.2e}")
    c.metric("Check", "matches reference" if res["ok"] else "MISMATCH")
    st.dataframe(pd.DataFrame(res["kernels"]), hide_index=True, width="stretch", key="last_kernels")
if _state.variants():
    st.markdown("**Variants measured in this tab** (side by side)")
    st.dataframe(pd.DataFrame(_state.variants()), hide_index=True, width="stretch", key="variants")
