"""Graph: the model under the current layouts, what the last action changed, and why."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from workbench.engine.session.graph_panel import backward_ops, op_details, op_modules
from workbench.engine.base.words import plural
from workbench.app import first_view, messages as _messages, state as _state
from workbench.app.backward_view import backward_toggle, expression_lines
from workbench.app.expr_form import expr_form
from workbench.app.network_view import network_time_section
from workbench.viz.blocks import MANY_OPS, find_blocks
from workbench.viz.drawn import block_labels
from workbench.viz.graph import FIT, chart_width, display_graph, graph_figure, matching_ops
from workbench.viz.preview import figure_svg

# A new tab fetches and evaluates Plotly (slow) only once the chart arrives: a static drawing of
# the same figure lies over the chart's place until Plotly has drawn it, then CSS hides it. Sent
# on the page's first run in a session only: by the next one, this tab has Plotly.
PREVIEW_CSS = """<style>
.st-key-graph_box { position: relative; }
.st-key-graph_box [data-testid="stElementContainer"]:has(.graph-preview) { position: absolute; inset: 0 0 auto 0; z-index: 2; }
.graph-preview { background: #fff; }
.st-key-graph_box:has(.js-plotly-plot .scatterlayer .trace) .graph-preview { display: none; }
</style>"""

TITLE = "Computational graph"
first_view.take_away()  # a new tab's first view, drawn while the engine imported: its place is ours
st.title(TITLE)
state = _state.state()
graph, plan = state.graph, state.program.plan
changed = _state.changed()
ops = [n.name for n in graph.nodes]
fused = [k.name for k in plan.kernels if len(k.ops) + len(k.fused) > 1]
found = find_blocks(display_graph(graph, plan))  # once per run: the figure takes them too
blocks = [b.name for b in found]
backward = backward_ops(graph)  # the ops a backward pass added: shown behind a toggle


@st.cache_data(show_spinner=False, max_entries=8)
def _modules(model: str, _graph) -> dict[str, str]:  # keyed by the model (its JSON): one forward pass of torch
    return op_modules(_graph, json.loads(model))


# a built-in network's ops and repeated blocks are named by the module they were written as
modules = _modules(json.dumps(state.session.model, sort_keys=True), graph) if found else {}
block_names = block_labels(found, modules)
# keyed by model, so that a big model opens with its blocks collapsed whatever the last one had
FOLD, UNFOLDED = f"graph_blocks:{graph.name}", f"graph_expanded_blocks:{graph.name}"
CAPTION = (f"**{graph.name}**: {plural(len(ops), 'op')}, {plural(len(plan.kernels), 'kernel')}, "
           f"{plural(len(plan.conversions), 'conversion op')}. "
           "Click an op (or find one) to select it for the other pages; drag to pan, double-click to come back to "
           "this view; **Fit the whole graph** shows all of it.")
st.caption(CAPTION)
_messages.show_messages()
expr_form()  # a new model of expression ops


def _clicked() -> None:
    """A click on an op selects it; a click on a collapsed kernel or block expands it."""
    points = st.session_state.graph_chart.selection.points
    picked = next((p["customdata"] for p in points if isinstance(p.get("customdata"), str)), None)
    if picked in ops:
        _state.select(picked)
    elif picked and picked.removeprefix("kernel ") in fused and st.session_state.get("graph_collapse"):
        st.session_state.graph_expanded = [*st.session_state.get("graph_expanded", []), picked.removeprefix("kernel ")]
    elif picked in blocks and st.session_state.get(FOLD):
        st.session_state[UNFOLDED] = [*st.session_state.get(UNFOLDED, []), picked]


def view_controls() -> tuple[str, str | None, bool, bool, list[str], bool, bool]:
    """The toolbar: the search query and the match to show (the selected op too), whether kernels
    and repeated blocks are drawn collapsed, the kernels and blocks expanded all the same, whether
    the whole graph is fitted to the chart, and whether a backward pass's ops are drawn."""
    with st.container(horizontal=True, vertical_alignment="bottom"):
        query = st.text_input("Find op", key="graph_search", placeholder="part of an op name", width=220)
        matches = matching_ops(ops, query)
        match = None
        if matches:
            match = st.selectbox(f"{len(matches)} of {len(ops)} ops match (outlined in yellow)", matches,
                                 key="graph_match", width=260)
            # the match shown is the selected op, as a click would make it, from the run that shows it
            # (a new query picks its first match): a click on another op stands until either changes
            if st.session_state.get("graph_search_pick") != (picked := (graph.name, query, match)):
                st.session_state.graph_search_pick = picked
                _state.select(match)
        else:
            st.session_state.pop("graph_search_pick", None)  # the same query typed again picks again
            if query:
                st.caption("no op matches")
        collapse = st.toggle("Collapse fused kernels", key="graph_collapse", disabled=not fused, width="content",
                             help="Draw each fused kernel as one node; click one to expand it.")
        expanded = st.multiselect("Expanded kernels", fused, key="graph_expanded", width=260) if collapse else []
        fold = st.toggle("Collapse repeated blocks", key=FOLD, value=bool(blocks) and len(ops) > MANY_OPS,
                         disabled=not blocks, width="content", help="Draw each block of ops whose structure repeats (a residual block, "
                                               "say) as one node; click one to expand it.")
        if fold and blocks:
            expanded = [*expanded, *st.multiselect("Expanded blocks", blocks, key=UNFOLDED, width=260,
                                                   format_func=lambda b: block_names.get(b, b))]
        fit = st.toggle("Fit the whole graph", key="graph_fit", width="content",
                        help="Scale the drawing down to show every op at once, a deep graph in side-by-side "
                             "columns (an edge that leaves a column's bottom goes on at the next one's top), with the "
                             "names and labels there is room for (hover an op or an edge for the rest); off, every "
                             "label shows at full size.")
        show_backward = backward_toggle(backward, graph.name)
    return query, match, collapse, fold, expanded, fit, show_backward


def op_panel(op: str) -> None:
    """The selected op's attributes, and the shape and stored layout of each tensor it touches."""
    d = op_details(graph, plan, op)
    st.markdown(f"#### {d.name}\n{d.label} (`{d.type}`, {d.kind})" + (f", kernel **{d.kernel}**" if d.kernel else ""))
    if op in modules:
        st.caption(f"module `{modules[op]}` of the network")
    expression_lines(d)
    if d.attrs:
        st.dataframe(pd.DataFrame(d.attrs, columns=["attribute", "value"]), hide_index=True, key="op_attrs")
    for t in d.tensors:
        via = f" via `{t.buffer}`" if t.buffer != t.tensor else ""
        st.markdown(f"**{t.role}** `{t.tensor}` {'x'.join(map(str, t.shape))}{via}  \n"
                    f"[{t.layout}] stored {'x'.join(map(str, t.stored))}")


query, match, collapse, fold, expanded, fit, show_backward = view_controls()
figure = graph_figure(graph, plan, changed=changed, selected=_state.selected(), search=query, focus=match,
                      collapse=collapse, expanded=expanded, collapse_blocks=fold, found=found, fit=FIT if fit else None,
                      block_names=block_names, backward=backward, show_backward=show_backward)
# the chart as wide as the drawing at its scale (one pixel per unit, or fitted: the figure keeps text
# that size and leaves out what has no room at this width); the side panel beside it when the page
# is wide enough, else below it
with st.container(horizontal=True, gap="medium"):
    with st.container(width=chart_width(figure), key="graph_box"):
        # the static drawing is of a one-pixel-per-unit view
        if figure.data and not fit and not st.session_state.get("graph_preview_sent"):
            st.session_state.graph_preview_sent = True
            svg = figure_svg(figure)
            st.markdown(f'{PREVIEW_CSS}<div class="graph-preview">{svg}</div>', unsafe_allow_html=True)
            if _state.fresh_tab():  # what the next new tab shows while a fresh server imports the engine
                first_view.remember(TITLE, CAPTION, svg)
        # Plotly's autoscale and zoom-out shrink the drawing under text that keeps its size: gone, and a
        # double-click comes back to the figure's own view (the fit toggle shows the whole graph)
        st.plotly_chart(figure, key="graph_chart", on_select=_clicked, selection_mode="points", width="stretch",
                        config={"displaylogo": False, "doubleClick": "reset",
                                "modeBarButtonsToRemove": ["autoScale2d", "zoomOut2d"]})
    with st.container(width=320):
        if (op := _state.selected()) in ops:
            op_panel(op)
        else:
            st.caption("Click an op (or find one) to see its attributes, shapes and layouts here.")

report = pd.DataFrame(plan.report())
if changed:
    st.markdown(f"**Last action** changed the layout of: {', '.join(sorted(changed))}")
    report.insert(0, "changed", report["tensor"].isin(changed))
st.subheader("Propagation report")
st.dataframe(report, width="stretch", hide_index=True, key="report", row_height=_state.WRAPPED_ROWS)
st.subheader("Kernels")
st.dataframe(pd.DataFrame([{"kernel": k.name, "ops": ", ".join(k.ops) or "(conversion)",
                            "reads": ", ".join(k.inputs), "writes": ", ".join(k.outputs),
                            "GFLOP": state.program.flops.get(k.name, 0) / 1e9} for k in plan.kernels]),
             width="stretch", hide_index=True, key="kernels", row_height=_state.WRAPPED_ROWS)


network_time_section(state)
