"""Loops: schedule one fused kernel with TVM's loop primitives, read the loop nest before and
after, then build, verify and time the whole program; every measured variant is kept."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.engine.loops.args import default_arguments, form_blocks, split_waste
from workbench.engine.loops.primitives import PRIMITIVES, diff, script
from workbench.engine.base.step import Step
from workbench.engine.session.kernel_views import nest_view
from workbench.engine.base.words import plural
from workbench.engine.base.errors import WorkbenchError
from workbench.app import code_view as _code, measure_view as _measure, messages as _messages, state as _state
from workbench.app.forms import FormContext, picked_arguments, primitive_form, widget_key

#: the most steps of a conversion's analytic schedule shown unfolded
_SHORT_SCHEDULE = 12

st.title("Loops")
state = _state.state()
plan = state.program.plan
_messages.show_messages()

names = [k.name for k in plan.kernels]
kernel = st.selectbox("Fused kernel", names, index=names.index(state.home_kernel(_state.selected())),
                      key="loop_kernel",
                      format_func=lambda k: f"{k}  ({' → '.join(plan.kernels[names.index(k)].ops) or 'conversion'})")
view = nest_view(state, kernel)
if (sched := state.kernel_schedule(kernel)).kind == "conversion":
    st.caption("This conversion runs on its analytic schedule (`engine/schedules/conversion/`: the steps below); a loop "
               "primitive you apply replaces it.")
    # a padded unfold's border copies each get steps of their own: a long list stays folded
    with st.expander(f"Its {len(sched.steps)} loop steps", expanded=len(sched.steps) <= _SHORT_SCHEDULE):
        st.code("\n".join(str(s) for s in sched.steps), language=None)
elif sched.trace is not None:  # a tuning result, edited or not
    edits = f", then {plural(len(sched.steps), 'loop step')} of yours" if sched.steps else ""
    st.caption(f"This kernel runs a tuning result (MetaSchedule's trace{edits}); a loop primitive you apply edits it.")
blocks, loops = list(view.blocks), view.loops

rows = [(b, lp) for b in blocks for lp in loops[b]]
table_key = f"loop_table_{kernel}_{st.session_state.get('loop_table_resets', 0)}"
with st.expander("Blocks and loops (outermost first): click a row to fill the primitive's loop", expanded=True):
    table = st.dataframe(pd.DataFrame([{"block": b, "loop": lp.name, "layout dim": view.dims.get(b, {}).get(lp.name, ""),
                                        "start": lp.start, "extent": lp.extent, "kind": lp.kind,
                                        "reduction": lp.reduction}
                                       for b, lp in rows]),
                         hide_index=True, width="stretch", key=table_key, on_select="rerun",
                         selection_mode="single-row")

prim = st.selectbox("Loop primitive", list(PRIMITIVES), key="loop_prim", format_func=lambda p: f"{p}: {PRIMITIVES[p].doc}")
seed = (kernel, prim, len(state.session.steps))
if st.session_state.get("loop_seeded") != seed:
    # a new primitive, kernel or action: the form starts from arguments TVM accepts on this kernel
    st.session_state.loop_seeded = seed
    st.session_state.loop_defaults = default_arguments(state.scheduled_func(kernel), prim)
    for arg, value in (st.session_state.loop_defaults or {}).items():
        st.session_state[widget_key("la", prim, arg)] = value
if st.session_state.loop_defaults is None:
    st.info(f"No block or loop of {kernel} takes {prim} (each choice was refused); the check below says why "
            "for the one chosen.", icon=":material/info:")
# the compute block first (a tuned conv's conv_update, not its conv_init)
ctx = FormContext(blocks=form_blocks(loops), loops={b: [(lp.name, lp.extent) for lp in loops[b]] for b in blocks},
                  writes=view.writes)
picked = table.selection.rows if table is not None else []
if picked and picked[0] < len(rows) and st.session_state.get("loop_picked") != (kernel, prim, picked[0]):
    # a new click: its block and loop go into the form's widgets before they are drawn
    st.session_state.loop_picked = (kernel, prim, picked[0])
    b, lp = rows[picked[0]]
    spec = PRIMITIVES[prim]
    same_block = st.session_state.get(widget_key("la", prim, spec.loop_of)) == b  # else the loops chosen are another block's
    current = st.session_state.get(widget_key("la", prim, "loops"), []) if same_block else []
    if current == (st.session_state.loop_defaults or {}).get("loops"):
        current = []  # the first click replaces the form's starting loops instead of adding to them
    for arg, value in picked_arguments(spec, b, lp.name, current, [x.name for x in loops[b]]).items():
        st.session_state[widget_key("la", prim, arg)] = value
try:
    args = primitive_form(prim, PRIMITIVES[prim], ctx, "la")
except WorkbenchError as e:
    st.warning(f"{prim}: {e}")
    st.stop()

after = view.script
try:  # the live check: what Apply would do, or why it would be refused (Apply reuses its push)
    step = Step.make("loop", kernel, prim, **args)
    pushed = state.push(step)
    preview, refused = nest_view(pushed, kernel).script, None
except WorkbenchError as e:
    step, pushed, preview, refused = None, None, None, e.reason
if refused:
    st.warning(f"{prim} would be refused: {refused}", icon=":material/block:")
elif prim == "split" and (waste := split_waste(args["factors"],
                                               extent := dict(ctx.loops[args["block"]])[args["loop"]])):
    st.info(f"split runs {waste} (the iterations past {extent} skip the body under a guard); factors that "
            f"divide {extent} waste none", icon=":material/info:")


def _applied() -> None:
    """After an action: the nest it changed is the next "before"; a clicked row of the loop table
    is not left checked over the new loops (a new key clears it; only then, as a new table is
    drawn slower than an updated one)."""
    st.session_state.setdefault("loop_before", {})[kernel] = after
    if (table_key in st.session_state and st.session_state[table_key]["selection"]["rows"]):
        st.session_state.loop_table_resets = st.session_state.get("loop_table_resets", 0) + 1


def _apply_loop() -> None:
    if _state.act(_state.previewed(state, step, pushed), f"{prim} applied to {kernel}"):
        _applied()


def _apply_expert() -> None:
    if _state.act(lambda s: s.with_expert_schedule(kernel), f"expert schedule applied to {kernel}"):
        _applied()


apply_col, expert_col = st.columns(2)
apply_col.button(f"Apply {prim}", key="apply_loop", type="primary", on_click=_apply_loop, disabled=refused is not None)
expert_col.button("Expert schedule", key="apply_expert", icon=":material/bolt:", on_click=_apply_expert,
                  disabled=state.kernel_schedule(kernel).kind != "default",
                  help="Register-blocked loop steps sized for the target's vector unit (NeoCPU / oneDNN / BLIS "
                       "style), applied as ordinary loop actions you can read, edit, undo and export.")

before = st.session_state.get("loop_before", {}).get(kernel, after)
shown = st.radio("Loop nest", ["side by side", "diff", f"preview of {prim}", "diff from default", "assembly"],
                 horizontal=True, key="nest_view")
if shown == "diff":
    st.code(diff(before, after) or "(no change yet)", language="diff")
elif shown.startswith("preview"):
    st.caption(f"The nest if you apply {prim} with these arguments, as a diff from the current one.")
    st.code(diff(after, preview) or "(no change)" if preview is not None else f"refused: {refused}", language="diff")
elif shown == "diff from default":
    st.code(diff(script(state.program.funcs[kernel]), after) or "(the default schedule)", language="diff")
elif shown == "assembly":
    _code.assembly(state, kernel)
else:  # one table, so both sides scroll together at full width
    _code.side_by_side(before, after, "before the last primitive", "after")

st.subheader("Build & measure")
if st.button("Build, verify and time the program", key="measure", type="primary"):
    _measure.measure_current(state)
    st.rerun()
_measure.show_measurements()
