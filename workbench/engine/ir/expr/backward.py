"""Graph-level autograd over expression ops (NeoFlow's hybrid: each op differentiated
symbolically by ``grad``, the graph by reverse-mode accumulation).

``backward_graph`` keeps the forward graph and adds, for every output ``o``, an input
``grad_o`` (d loss / d o), and for every tensor ``t`` its gradient ``grad_t``: one op per
consumer of ``t`` (``grad_t__<consumer>`` when there are several, then an op summing them).
The new graph's outputs are the forward outputs, then ``grad_<input>`` for every input.
"""

from __future__ import annotations

from ..graph import Graph, GraphBuilder
from ...base.errors import GraphError
from .grad import gradient, sum_of

__all__ = ["backward_graph", "grad_name"]


def grad_name(tensor: str) -> str:
    """The name of ``tensor``'s gradient in a backward graph."""
    return f"grad_{tensor}"


def backward_graph(graph: Graph) -> Graph:
    """``graph`` (of expression ops only) with its backward pass (see the module docstring)."""
    for n in graph.nodes:
        if "expr" not in n.kwargs:
            raise GraphError(f"op {n.name} ({n.type}) is not an expression op: only expression ops have derived "
                             "gradients")
    if read := [o for o in graph.outputs if graph.consumers(o)]:
        raise GraphError(f"output {read[0]} is also read by an op: its gradient would have two sources")
    b = GraphBuilder(graph.name)
    for t in graph.tensors.values():
        if t.role == "input":
            b.input(t.name, t.shape, t.dims)
        elif t.role == "const":
            b.const(t.name, t.shape, t.dims, graph.values.get(t.name))
    for n in graph.nodes:
        b.op(n.name, n.type, *n.inputs, **n.kwargs)
    taken = set(b.tensors)
    for o in graph.outputs:
        _new(b, taken, grad_name(o))
        b.input(grad_name(o), graph.tensors[o].shape, graph.tensors[o].dims)
    parts: dict[str, list[str]] = {}
    for n in reversed(graph.nodes):
        if n.name not in graph.outputs:
            if not parts.get(n.name):
                continue
            _total(b, taken, n.name, parts[n.name])
        op = n.kwargs["expr"]
        for t in op.inputs:
            single = len(graph.consumers(t)) == 1
            name = grad_name(t) if single else f"{grad_name(t)}__{n.name}"
            shapes = {k: v.shape for k, v in b.tensors.items()}
            for g in gradient(op, t, n.name, grad_name(n.name), shapes, name):
                _new(b, taken, g.name)
                b.op(g.name, g.op.type, *g.op.inputs, expr=g.op)
            parts.setdefault(t, []).append(name)
    for t in graph.inputs:
        _total(b, taken, t, parts[t])
    return b.build(list(graph.outputs) + [grad_name(t) for t in graph.inputs],
                   doc=f"{graph.doc} With its backward pass: grad_<output> in, grad_<input> out.".strip())


def _total(b: GraphBuilder, taken: set[str], tensor: str, parts: list[str]) -> None:
    """``grad_<tensor>`` as the sum of its parts (nothing to add for one part: it is named so)."""
    if len(parts) == 1:
        return
    name = grad_name(tensor)
    op = sum_of(name, parts, {k: v.shape for k, v in b.tensors.items()})
    _new(b, taken, name)
    b.op(name, op.type, *op.inputs, expr=op)


def _new(b: GraphBuilder, taken: set[str], name: str) -> None:
    if name in taken:
        raise GraphError(f"the backward pass names a tensor {name}, which the graph already has: rename it")
    taken.add(name)
