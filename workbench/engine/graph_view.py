"""What the Graph page's side panel shows about one op: its attributes, and every tensor it
reads or writes with its shape, the buffer it actually touches and that buffer's layout.

Pure: graph and plan in, a frozen record out (the page renders it; tests compare it).
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import Graph
from .propagate import Plan

__all__ = ["OpDetails", "TensorUse", "op_details"]


@dataclass(frozen=True, slots=True)
class TensorUse:
    role: str  # "input" | "const" | "output"
    tensor: str
    shape: tuple[int, ...]  # logical
    buffer: str  # the buffer the op reads or writes (a converted one when a conversion sits on the edge)
    layout: str  # that buffer's layout label
    stored: tuple[int, ...]  # that buffer's stored shape


@dataclass(frozen=True, slots=True)
class OpDetails:
    name: str
    type: str
    label: str  # the paper's operator name (C2D, GMM...) or the op type
    kind: str
    kernel: str  # the fused kernel that runs it ("" when none)
    attrs: tuple[tuple[str, str], ...]
    tensors: tuple[TensorUse, ...]


def op_details(graph: Graph, plan: Plan, op: str) -> OpDetails:
    """The side panel's record of ``op``; an unknown op raises ``GraphError``.

    >>> from workbench.engine import zoo
    >>> from workbench.engine.book import LayoutBook
    >>> from workbench.engine.propagate import plan_layouts
    >>> g = zoo.load("r18_stem")
    >>> d = op_details(g, plan_layouts(g, LayoutBook()), "conv")
    >>> d.label, d.kernel, dict(d.attrs)["stride"]
    ('C2D', 'conv', '2')
    >>> [(t.role, t.tensor, t.layout) for t in d.tensors]
    [('input', 'pad', 'N C H W'), ('const', 'conv.weight', 'O I H W'), ('output', 'conv', 'N C H W')]
    """
    node = graph.node(op)
    kernel = next((k.name for k in plan.kernels if op in k.ops), "")
    uses = [("const" if graph.tensor(t).role == "const" else "input", t, plan.reads.get((op, t), t)) for t in node.inputs]
    uses.append(("output", op, plan.writes.get(op, op)))
    tensors = []
    for role, t, buf in uses:
        lay = plan.buffers[buf].layout if buf in plan.buffers else plan.layout_of(t)
        tensors.append(TensorUse(role, t, graph.tensor(t).shape, buf, lay.label, tuple(lay.shape)))
    return OpDetails(node.name, node.type, node.label, node.kind, kernel,
                     tuple((k, str(v)) for k, v in node.attrs), tuple(tensors))

