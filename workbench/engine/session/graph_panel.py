"""What the Graph page's side panel shows about one op: its attributes, and every tensor it
reads or writes with its shape, the buffer it actually touches and that buffer's layout; and
which ``torch.nn`` module of a built-in network runs each op (``op_modules``).

``op_details`` is pure: graph and plan in, a frozen record out (the page renders it; tests compare it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..models import zoo
from ..ir.graph import Graph
from ..layout.propagate import Plan

__all__ = ["OpDetails", "TensorUse", "op_details", "op_modules"]


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

    >>> from workbench.engine.models import zoo
    >>> from workbench.engine.layout.book import LayoutBook
    >>> from workbench.engine.layout.propagate import plan_layouts
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



def _module_kind(graph: Graph, op: str) -> str | None:
    """Which kind of ``torch.nn`` layer an op of an imported network comes from, if any."""
    node = graph.node(op)
    if node.type.startswith("conv"):
        return "conv"
    if node.type == "matmul" and graph.tensor(node.inputs[-1]).role == "const":
        return "dense"
    return None


def op_modules(graph: Graph, model: Mapping) -> dict[str, str]:
    """Op -> the path of the ``torch.nn`` module that runs it (``features.4.body.0``), for the
    convolutions and dense layers of a built-in network (``zoo.NETWORKS``, ``model`` being the
    session's "model" field); empty for any other model. The layers called on one forward pass of
    the network's example input are matched in order, the k-th convolution (dense layer) called
    to the graph's k-th (the importer keeps the program's order); a kind whose counts differ
    (BERT's attention matmuls are no layer) maps nothing."""
    if model.get("zoo") not in zoo.NETWORKS:
        return {}
    import torch
    from torch import nn

    from ..models import networks

    module, example = getattr(networks, model["zoo"])(**{k: v for k, v in model.items() if k != "zoo"})
    path = {m: name for name, m in module.named_modules()}
    called: dict[str, list[str]] = {"conv": [], "dense": []}
    convs = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    hooks = [m.register_forward_pre_hook(lambda m, _: called["conv" if isinstance(m, convs) else "dense"].append(path[m]))
             for m in module.modules() if isinstance(m, (*convs, nn.Linear))]
    try:
        with torch.no_grad():
            module(*example)
    finally:
        for h in hooks:
            h.remove()
    ours: dict[str, list[str]] = {"conv": [], "dense": []}
    for n in graph.nodes:
        if (kind := _module_kind(graph, n.name)) is not None:
            ours[kind].append(n.name)
    return {op: p for kind, ops in ours.items() if len(ops) == len(called[kind]) for op, p in zip(ops, called[kind])}
