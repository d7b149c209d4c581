"""The drawn graph of a backward pass: its ops marked and drawn dashed, or left out with what
only they use (``drawn.backward_view``, ``graph_figure(backward=...)``)."""

from __future__ import annotations

import pytest

from workbench.engine.ir.expr import backward_graph, expr_graph, read_expr
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.propagate import plan_layouts
from workbench.engine.session.graph_panel import backward_ops
from workbench.viz.drawn import backward_view, display_graph
from workbench.viz.graph import BACKWARD, graph_figure

MLP = ("input a[4, 6]\ninput w[6, 5]\n"
       "mm: out[i, j] += a[i, k] * w[k, j]\n"
       "act: out[i, j] = tanh(mm[i, j])")


@pytest.fixture(scope="module")
def mlp():
    g = backward_graph(expr_graph(read_expr(MLP), "mlp"))
    return g, plan_layouts(g, LayoutBook()), set(backward_ops(g))


def _drawn_ops(fig) -> set[str]:
    """The nodes the figure has click targets for (their names are the traces' customdata)."""
    return {c for t in fig.data if t.mode == "markers" and t.customdata is not None for c in t.customdata
            if isinstance(c, str)}


def test_the_backward_pass_is_marked_with_what_only_it_uses(mlp):
    g, plan, back = mlp
    assert back == {"grad_mm", "grad_a", "grad_w"}
    drawn = backward_view(display_graph(g, plan), back)
    marked = {n for n, d in drawn.nodes(data=True) if d.get("backward")}
    # grad_act is the only input the forward ops do not read; the gradients are graph outputs
    assert marked == back | {"grad_act", "output grad_a", "output grad_w"}
    assert all(drawn.nodes[n]["hover"].endswith("<i>backward pass</i>") for n in marked)
    assert not any(drawn.nodes[n].get("backward") for n in ("a", "w", "mm", "act", "output act"))


def test_the_forward_view_is_the_forward_graphs_drawing(mlp):
    g, plan, back = mlp
    forward = expr_graph(read_expr(MLP), "mlp")
    shown = backward_view(display_graph(g, plan), back, show=False)
    alone = display_graph(forward, plan_layouts(forward, LayoutBook()))
    assert set(shown.nodes) == set(alone.nodes) and set(shown.edges) == set(alone.edges)


def test_the_figure_draws_backward_ops_dashed_with_a_legend_entry_or_leaves_them_out(mlp):
    g, plan, back = mlp
    plain = graph_figure(g, plan)
    assert not [t for t in plain.data if t.name == BACKWARD] and back <= _drawn_ops(plain)
    shown = graph_figure(g, plan, backward=back)
    dashed = [t for t in shown.data if t.name == BACKWARD]
    assert dashed and {op for t in dashed for op in t.meta} == back | {"grad_act", "output grad_a", "output grad_w"}
    assert all(t.line.dash == "dash" for t in dashed)
    assert [(t.line.color, t.meta) for t in dashed if t.showlegend is not False] == [("#555", ())]  # one legend entry
    assert _drawn_ops(shown) == _drawn_ops(plain)
    hidden = graph_figure(g, plan, backward=back, show_backward=False)
    assert not [t for t in hidden.data if t.name == BACKWARD]
    assert _drawn_ops(hidden) == {"a", "w", "mm", "act", "output act"}
    assert not any("grad_" in a.text for a in hidden.layout.annotations)  # no edge of a gradient is labelled
