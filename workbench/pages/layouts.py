"""Layouts: apply ALT's layout primitives (or a preset) to a tensor, with a live preview of the
stored shape and of the rewritten access expression before anything is applied."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.engine.errors import WorkbenchError
from workbench.engine.step import Step
from workbench.engine.layout import INVERSES, PRIMITIVES
from workbench.engine.layouts import access_text, apply_actions, apply_layout, current, layout_keys
from workbench.engine.presets import PRESETS, preset_actions
from workbench.engine.propagate import plan_layouts
from workbench.pages import _state

st.title("Layouts")
state = _state.state()
graph, book = state.graph, state.book
_state.show_messages()


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.replace("[", "").replace("]", "").split(",") if x.strip()]
    except ValueError:
        raise WorkbenchError(f"{what}: write integers separated by commas, got {text!r}") from None


def _describe(key: str, lay) -> dict:
    return {"tensor": key, "layout": lay.label, "stored shape": "x".join(map(str, lay.shape)),
            "access": access_text(lay)}


keys = layout_keys(graph)
sel = _state.selected()
default = keys.index(sel) if sel in keys else (keys.index("conv") if "conv" in keys else 0)
key = st.selectbox("Tensor (or `T@op`: the layout complex op `op` wants for its input `T`)", keys, index=default,
                   key="layout_key")
lay = current(graph, book, key)
st.markdown(f"Current layout of **{key}**: `{lay.label}`, stored shape `{list(lay.shape)}` "
            f"(logical `{list(lay.logical)}`)")

prim_tab, preset_tab = st.tabs(["Primitive", "Preset"])

with prim_tab:
    prim = st.selectbox("Primitive", list(PRIMITIVES), key="layout_prim",
                        format_func=lambda p: f"{p} (inverse of {INVERSES[p]})" if p in INVERSES else p)
    rank = len(lay.shape)
    args: dict = {}
    cols = st.columns(max(1, len(PRIMITIVES[prim])))
    try:
        for col, name in zip(cols, PRIMITIVES[prim]):
            with col:
                if name == "dim":
                    args["dim"] = int(st.number_input(f"dim (0..{rank - 1})", 0, rank - 1, min(1, rank - 1),
                                                      key=f"lp_{prim}_dim"))
                elif name == "factors":
                    ext = lay.shape[args.get("dim", 0)]
                    args["factors"] = _ints(st.text_input(f"factors (product = {ext}; -1 infers one)", f"-1, 16",
                                                          key="lp_factors"), "factors")
                elif name in ("perm", "dims"):
                    guess = ", ".join(map(str, range(rank))) if name == "perm" else "1, 2"
                    args[name] = _ints(st.text_input(f"{name} (dims 0..{rank - 1})", guess, key=f"lp_{name}"), name)
                elif name in ("tile", "stride"):
                    args[name] = int(st.number_input(name, 1, 4096, 4, key=f"lp_{name}"))
                elif name in ("before", "after"):
                    args[name] = int(st.number_input(f"{name} (zeros)", 0, 4096, 0, key=f"lp_{name}"))
                elif name == "into":
                    consts = graph.constants or ["(no constant)"]
                    args["into"] = st.selectbox("into (a constant)", consts, key="lp_into")
        preview = apply_layout(graph, book, key, prim, args)
        new = current(graph, preview, key)
        ok = True
    except WorkbenchError as e:
        st.warning(f"Not applicable: {e}", icon=":material/warning:")
        ok = False
    if ok:
        st.markdown("**Preview**")
        st.dataframe(pd.DataFrame([_describe("before", lay), _describe("after", new)]), hide_index=True,
                     width="stretch", key="lp_preview")
    st.button(f"Apply {prim}", key="apply_prim", type="primary", disabled=not ok, on_click=_state.act,
              args=(lambda s: s.push(Step.make("layout", key, prim, **args)),
                    f"{prim} applied to {key}"))

with preset_tab:
    name = st.selectbox("Preset", list(PRESETS), key="preset_name",
                        format_func=lambda p: f"{p} (on a {PRESETS[p][1]})")
    applies = PRESETS[name][1]
    if applies == "tensor":
        target = key
    else:
        want = "conv" if "conv" in applies else "matmul"
        ops = [n.name for n in graph.nodes if n.kind == "complex" and n.type.startswith(want)]
        if not ops:
            st.info(f"{graph.name} has no {want} op for this preset.")
            st.stop()
        target = st.selectbox("Op", ops, index=ops.index(sel) if sel in ops else 0, key="preset_op")
    params: dict = {}
    defaults = PRESETS[name][2]
    pcols = st.columns(max(1, len(defaults)))
    try:
        for col, (p, d) in zip(pcols, defaults.items()):
            with col:
                if p == "tiles":
                    params[p] = _ints(st.text_input("tiles (one per spatial dim, e.g. ht, wt)", "4, 16",
                                                    key="pp_tiles"), "tiles")
                else:
                    params[p] = int(st.number_input(p, 1, 4096, int(d), key=f"pp_{p}"))
        acts = preset_actions(graph, name, target, **params)
        preview = apply_actions(graph, book, acts)
        touched = list(dict.fromkeys(k for k, _, _ in acts))
        st.markdown(f"**Preview**: {len(acts)} primitives on {', '.join(touched)}")
        st.dataframe(pd.DataFrame([_describe(k, current(graph, preview, k)) for k in touched]), hide_index=True,
                     width="stretch", key="pp_preview")
        plan = plan_layouts(graph, preview)
        st.caption(f"after propagation: {len(plan.conversions)} conversion ops, {len(plan.kernels)} kernels")
        ok = True
    except WorkbenchError as e:
        st.warning(f"Not applicable: {e}", icon=":material/warning:")
        ok = False
    st.button(f"Apply preset {name}", key="apply_preset", type="primary", disabled=not ok, on_click=_state.act,
              args=(lambda s: s.push(Step.make("preset", target, name, **params)),
                    f"{name} applied to {target}"))

st.subheader("Layouts in this session")
rows = [_describe(k, current(graph, book, k)) for k in keys if book.get(k) is not None]
st.dataframe(pd.DataFrame(rows) if rows else pd.DataFrame(columns=["tensor", "layout"]), hide_index=True,
             width="stretch", key="lp_all")
