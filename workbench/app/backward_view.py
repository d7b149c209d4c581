"""The Graph page's view of a backward pass: the toolbar's "Show backward ops" toggle (only for a
graph that has one: ``graph_panel.backward_ops``), and what the side panel says of an expression
op: its text in the language (forward or derived) and, for a derived op, what it derives."""

from __future__ import annotations

import streamlit as st

from workbench.engine.session.graph_panel import OpDetails

__all__ = ["backward_toggle", "expression_lines"]

ROLES = {"loss": "the training step's loss", "update": "the training step's SGD update of a parameter"}


def backward_toggle(backward: dict[str, str], graph: str) -> bool:
    """Whether to draw the backward pass's ops too (off: the forward graph alone); no toggle,
    and nothing to hide, when ``backward`` is empty. Keyed by the graph's name: another model
    opens on its forward graph."""
    if not backward:
        return True
    return st.toggle("Show backward ops", key=f"graph_backward:{graph}", width="content",
                     help=f"Draw the {len(backward)} ops the backward pass adds (gradients; a training step's loss and "
                          "update), dashed; off, the forward graph alone.")


def expression_lines(d: OpDetails) -> None:
    """An expression op's text; for a gradient, the tensor it is the gradient of (the part
    through one consumer), and its note (a guard, a new reduction axis)."""
    if not d.expression:
        return
    st.code(d.expression, language=None, wrap_lines=True)
    tensor, via = d.gradient_of
    if tensor:
        st.markdown(f"gradient of **`{tensor}`**" + (f", the part through `{via}`" if via else ""))
    elif d.role:
        st.markdown(ROLES.get(d.role, f"derived by the backward pass ({d.role})"))
    if d.note:
        st.caption(d.note)
