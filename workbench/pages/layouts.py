"""Layouts: apply ALT's layout primitives (or a preset) to a tensor, with a live preview of the
stored shape and of the rewritten access expression before anything is applied. The preview is
the session's own push (``State.push``), and Apply keeps it."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.step import Step
from workbench.engine.layout.primitives import PRIMITIVES
from workbench.engine.layout.keys import access_text, current, layout_keys
from workbench.engine.layout.presets import PRESETS, preset_actions
from workbench.engine.layout.propagate import plan_layouts
from workbench.engine.base.words import plural
from workbench.app import messages as _messages, state as _state
from workbench.app.forms import FormContext, parse_ints, primitive_form

st.title("Layouts")
state = _state.state()
graph, book = state.graph, state.book
_messages.show_messages()


def _describe(key: str, lay) -> dict:
    return {"tensor": key, "layout": lay.label, "stored shape": "x".join(map(str, lay.shape)),
            "access": access_text(lay)}


def _preset_refusal(step: Step, error: WorkbenchError) -> str:
    """Why a preset does not apply, in the user's terms: a preset rewrites the original layouts,
    so tensors that already have one (an earlier preset or primitive) refuse its primitives."""
    try:
        acts = preset_actions(graph, step.primitive, step.target, **step.kwargs)
    except WorkbenchError:
        acts = []
    laid = [k for k in dict.fromkeys(a.target for a in acts) if book.get(k) is not None]
    if not laid:
        return error.reason
    return (f"{', '.join(f'{k} is already {current(graph, book, k).label}' for k in laid)}; a preset starts from "
            f"the original layouts, so undo the actions on {', '.join(laid)} first")  # TVM's words add nothing


keys = layout_keys(graph)
sel = _state.selected()
default = keys.index(sel) if sel in keys else (keys.index("conv") if "conv" in keys else 0)
key = st.selectbox("Tensor (or `T@op`: the layout complex op `op` wants for its input `T`)", keys, index=default,
                   key="layout_key")
lay = current(graph, book, key)
st.markdown(f"Current layout of **{key}**: `{lay.label}`, stored shape `{list(lay.shape)}` "
            f"(logical `{list(lay.logical)}`)")

# keyed, so the tab in use stays open when an Apply reruns the page; the tab in view alone is
# drawn, so an Apply redraws half the widgets
prim_tab, preset_tab = st.tabs(["Primitive", "Preset"], key="layout_tab", on_change="rerun")
_state.keep_widgets()  # the choice in the tab not drawn survives this run (kept widgets: layout_prim, preset_name)

if prim_tab.open:
    with prim_tab:
        prim = st.selectbox("Primitive", list(PRIMITIVES), key="layout_prim",
                            format_func=lambda p: f"{p}: {PRIMITIVES[p].doc}")
        ctx = FormContext(dims=[d.name for d in lay.dims], extents=lay.shape, tensors=graph.constants)
        try:
            args = primitive_form(prim, PRIMITIVES[prim], ctx, "lp")
            step = Step.make("layout", key, prim, **args)
            pushed = state.push(step)
            new = current(graph, pushed.book, key)
            ok = True
        except WorkbenchError as e:
            st.warning(f"Not applicable: {e.reason}", icon=":material/warning:")
            ok = False
        if ok:
            st.markdown("**Preview**")
            st.dataframe(pd.DataFrame([_describe("before", lay), _describe("after", new)]), hide_index=True,
                         width="stretch", key="lp_preview", row_height=_state.WRAPPED_ROWS)
            if prim == "split" and (covered := math.prod(new.shape[args["dim"]:args["dim"] + len(args["factors"])])) \
                    > (extent := lay.shape[args["dim"]]):
                st.info(f"pads {lay.dims[args['dim']].name} {extent} -> {covered}: the factors cover more than the "
                        "dim; the padding holds zeros", icon=":material/info:")
        st.button(f"Apply {prim}", key="apply_prim", type="primary", disabled=not ok,
                  on_click=_state.act if ok else None,
                  args=(_state.previewed(state, step, pushed), f"{prim} applied to {key}") if ok else None)

if preset_tab.open:
    with preset_tab:
        name = st.selectbox("Preset", list(PRESETS), key="preset_name", format_func=lambda p: PRESETS[p].label)
        preset = PRESETS[name]
        targets = preset.targets(graph)
        if not targets:
            st.info(f"{graph.name} has nothing {preset.label.split('(', 1)[1][:-1]} for this preset.")
            st.stop()
        pick = key if key in targets else sel
        target = st.selectbox("Applied to", targets, index=targets.index(pick) if pick in targets else 0,
                              key="preset_target")
        params: dict = {}
        pcols = st.columns(max(1, len(preset.defaults)))
        step = None
        try:
            for col, (p, d) in zip(pcols, preset.defaults.items()):
                with col:
                    if p == "tiles":
                        params[p] = parse_ints(st.text_input("tiles (one per spatial dim, e.g. ht, wt)", "4, 16",
                                                             key="pp_tiles"), "tiles")
                    elif isinstance(d, bool):
                        params[p] = st.checkbox(p, d, key=f"pp_{p}")
                    else:
                        params[p] = int(st.number_input(p, 1, 4096, int(d), key=f"pp_{p}"))
            step = Step.make("preset", target, name, **params)
            pushed = state.push(step)
            touched = [k for k in keys if pushed.book.get(k) != book.get(k)]
            st.markdown(f"**Preview**: the layouts of {', '.join(touched) or 'no tensor'}")
            st.dataframe(pd.DataFrame([_describe(k, current(graph, pushed.book, k)) for k in touched]),
                         hide_index=True, width="stretch", key="pp_preview", row_height=_state.WRAPPED_ROWS)
            plan = plan_layouts(graph, pushed.book)  # the plan alone: the program waits for Apply
            st.caption(f"after propagation: {plural(len(plan.conversions), 'conversion op')}, "
                       f"{plural(len(plan.kernels), 'kernel')}")
            ok = True
        except WorkbenchError as e:
            st.warning(f"Not applicable: {_preset_refusal(step, e) if step else e}", icon=":material/warning:")
            ok = False
        st.button(f"Apply preset {name}", key="apply_preset", type="primary", disabled=not ok,
                  on_click=_state.act if ok else None,
                  args=(_state.previewed(state, step, pushed), f"{name} applied to {target}") if ok else None)

st.subheader("Layouts in this session")
rows = [_describe(k, current(graph, book, k)) for k in keys if book.get(k) is not None]
st.dataframe(pd.DataFrame(rows) if rows else pd.DataFrame(columns=["tensor", "layout"]), hide_index=True,
             width="stretch", key="lp_all", row_height=_state.WRAPPED_ROWS)
