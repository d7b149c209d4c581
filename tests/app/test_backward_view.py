"""The Graph page on a graph with its backward pass: a "Show backward ops" toggle (off: the
forward graph alone; on: every op, the derived ones dashed), and the side panel of a derived op
with its expression, the tensor it is the gradient of and its note."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from tests.app.apptest import home
from workbench.engine.models import zoo
from workbench.engine.models.frontend.sources import backward_inputs
from workbench.engine.models.training_examples import EXAMPLES_DIR
from workbench.engine.session.session import new_session, replay
from workbench.viz.graph import BACKWARD

FORWARD = {"gates", "ingate", "outgate", "cand", "new_c", "new_h"}


def _figure(app: AppTest) -> tuple[set[str], set[str]]:
    """The ops the graph chart draws (its click targets' names) and those it draws dashed."""
    fig = json.loads(app.get("plotly_chart")[0].proto.spec)
    drawn = {c for t in fig["data"] if t.get("mode") == "markers" for c in t.get("customdata") or [] if isinstance(c, str)}
    dashed = {op for t in fig["data"] if t.get("name") == BACKWARD for op in t["meta"]}
    return drawn, dashed


def test_the_backward_ops_show_behind_a_toggle_with_their_derived_expressions(at):
    assert not [t for t in at.toggle if str(t.key).startswith("graph_backward")]  # a forward model: no toggle
    path = EXAMPLES_DIR / "lltm_cell.expr"
    spec, graph = zoo.file_model(str(path), backward_inputs(path))
    at.session_state["state"] = replay(new_session(spec))
    home(at)
    assert not at.exception, at.exception
    toggle = at.toggle(key="graph_backward:lltm_cell")
    assert toggle.label == "Show backward ops" and toggle.value is False
    drawn, dashed = _figure(at)
    assert FORWARD <= drawn and not {d for d in drawn if d.startswith("grad_") or d.startswith("output grad_")}
    assert dashed == set()

    toggle.set_value(True).run()
    drawn, dashed = _figure(at)
    derived = {n.name for n in graph.nodes} - FORWARD
    assert {"grad_gates", "grad_gates__cand", "grad_W", "grad_b"} <= derived
    assert derived | FORWARD <= drawn and derived <= dashed and not FORWARD & dashed
    assert {"grad_new_h", "output grad_W"} <= dashed  # the gradient it takes, the gradients it gives

    at.session_state["selected"] = "grad_gates__cand"  # what a click on the op does
    at.run()
    assert not at.exception, at.exception
    expr = str(graph.node("grad_gates__cand").kwargs["expr"])
    assert [c.value for c in at.code] == [expr] and expr.startswith("grad_gates__cand[n, z1] = where(")
    assert "gradient of **`gates`**, the part through `cand`" in [m.value for m in at.markdown]
    assert "gradient of gates at gates[n, s + 10] in cand" in [c.value for c in at.caption]

    at.session_state["selected"] = "gates"  # a forward op: its own text, nothing derived
    at.run()
    assert [c.value for c in at.code] == [str(graph.node("gates").kwargs["expr"])]
    assert not [m.value for m in at.markdown if m.value.startswith("gradient of")]
