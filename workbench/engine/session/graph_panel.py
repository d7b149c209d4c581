"""What the Graph page's side panel shows about one op: its attributes, and every tensor it
reads or writes with its shape, the buffer it actually touches and that buffer's layout; and
which ``torch.nn`` module of a built-in network runs each op (``op_modules``); and which ops a
backward pass added (``backward_ops``: the gradients of ``ir.expr.backward_graph``, the loss and
the update of ``models.training.training_step``), so that the page can draw the forward graph alone.

``op_details`` is pure: graph and plan in, a frozen record out (the page renders it; tests compare it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..models import zoo
from ..models.training import target_name, updated_name
from ..ir.expr.backward import grad_name
from ..ir.graph import Graph
from ..layout.propagate import Plan

__all__ = ["OpDetails", "TensorUse", "backward_ops", "gradient_of", "op_details", "op_modules"]


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
    expression: str = ""  # an expression op's text in the language (forward or derived)
    role: str = ""  # in a backward pass: "gradient" | "loss" | "update" (``backward_ops``)
    gradient_of: tuple[str, str] = ("", "")  # a gradient op's (tensor, the consumer it is the part through, or "")
    note: str = ""  # what a derived op's text does not say (a guard, a new reduction axis)


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
    expr = node.kwargs.get("expr")
    part = backward_ops(graph).get(op, "")
    kernel = next((k.name for k in plan.kernels if op in k.ops), "")
    uses = [("const" if graph.tensor(t).role == "const" else "input", t, plan.reads.get((op, t), t)) for t in node.inputs]
    uses.append(("output", op, plan.writes.get(op, op)))
    tensors = []
    for role, t, buf in uses:
        lay = plan.buffers[buf].layout if buf in plan.buffers else plan.layout_of(t)
        tensors.append(TensorUse(role, t, graph.tensor(t).shape, buf, lay.label, tuple(lay.shape)))
    attrs = tuple((k, str(v)) for k, v in node.attrs if k != "expr")  # the expression has its own line
    return OpDetails(node.name, node.type, node.label, node.kind, kernel, attrs, tuple(tensors),
                     "" if expr is None else str(expr), part,
                     gradient_of(graph, op) if part == "gradient" else ("", ""), getattr(expr, "note", ""))


def backward_ops(graph: Graph) -> dict[str, str]:
    """Op -> its role, for the ops a backward pass added to ``graph``: ``"gradient"`` (an op of
    ``backward_graph``), ``"loss"`` and ``"update"`` (a ``training_step``'s loss and SGD update);
    empty for a graph without one. They are the ops that read, directly or not, the gradient
    ``grad_<output>`` the graph takes (an input, or a training step's constant) or a training
    target ``target_<op>``, and the derived ops that read neither (a zero gradient, whose note
    says why): no forward op reads any of these."""
    seeds = {grad_name(o) for o in graph.outputs if grad_name(o) in graph.tensors and graph.producer(grad_name(o)) is None}
    noted = {n.name for n in graph.nodes if getattr(n.kwargs.get("expr"), "note", "")}
    if not seeds and not noted:
        return {}
    seeds |= {t for t in graph.inputs if any(t == target_name(n.name) for n in graph.nodes)}
    roles: dict[str, str] = {}
    for n in graph.nodes:  # in topological order: an op after what it reads
        if n.name in noted or any(t in seeds or t in roles for t in n.inputs):
            param = next((p for p in graph.inputs if n.name == updated_name(p) and grad_name(p) in n.inputs), None)
            roles[n.name] = "update" if param else "gradient" if n.name.startswith(grad_name("")) else "loss"
    return roles


def gradient_of(graph: Graph, op: str) -> tuple[str, str]:
    """The tensor gradient op ``op`` is (part of) the gradient of, by the names ``backward_graph``
    gives (``grad_<t>``; ``grad_<t>__<consumer>`` the part through one consumer of ``t``, and
    ``__1``, ``__2``... the parts of one read each), and that consumer (``""`` for all of them);
    ``("", "")`` for a name it does not give.

    >>> from workbench.engine.ir.expr import expr_graph, read_expr, backward_graph
    >>> g = backward_graph(expr_graph(read_expr("input a[3]\\nb: out[i] = a[i] * a[2 - i]\\nc: out[i] = b[i] + a[i]"), "f"))
    >>> [n.name for n in g.nodes if n.name.startswith("grad_a")]
    ['grad_a__c', 'grad_a__b__1', 'grad_a__b__2', 'grad_a__b', 'grad_a']
    >>> gradient_of(g, "grad_a__b__2"), gradient_of(g, "grad_a"), gradient_of(g, "grad_b"), gradient_of(g, "c")
    (('a', 'b'), ('a', ''), ('b', ''), ('', ''))
    """
    rest = op.removeprefix(grad_name(""))
    if rest == op:
        return "", ""
    parts = rest.split("__")
    for k in range(len(parts), 0, -1):  # the longest name that is a tensor: a tensor's name may hold "__"
        if (tensor := "__".join(parts[:k])) in graph.tensors and not tensor.startswith(grad_name("")):
            via = "__".join(parts[k:])
            consumer = next((n.name for n in graph.consumers(tensor) if via == n.name or via.startswith(n.name + "__")), "")
            return tensor, consumer
    return "", ""



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
