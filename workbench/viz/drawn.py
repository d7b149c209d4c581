"""The drawn graph: the engine's graph and plan as a networkx DAG of what the Graph page draws.

Nodes are the graph inputs, the ops, the conversions and the graph outputs, each with its kind
(its colour), its text and its hover; every edge carries its tensor, the buffer it reads and
that buffer's stored layout. Fused kernels can be contracted into one node each
(``collapse_kernels``; repeated blocks: ``blocks.collapse_blocks``), and a collapsed block takes
the name of the module it was written as (``block_labels``), when the model says. The ops of a
backward pass can be marked, or left out with what only they use (``backward_view``).

Input: an engine ``Graph`` and the ``Plan`` of ``propagate.plan_layouts``, duck-typed (no TVM here).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import networkx as nx

from workbench.viz import blocks

if TYPE_CHECKING:  # engine types, for readers only
    from workbench.engine.ir.graph import Graph
    from workbench.engine.layout.propagate import Plan

__all__ = ["KIND_COLOURS", "SYMBOLS", "DIAMONDS", "display_graph", "collapse_kernels", "matching_ops", "node_text",
           "edge_text", "kernel_title", "block_labels", "label_blocks", "backward_view"]

KIND_COLOURS = {"complex": "#1f77b4", "elementwise": "#2ca02c", "other": "#7f7f7f", "opaque": "#8c564b",
                "conversion": "#d62728", "fused conversion": "#ff9896", "input": "#bcbd22", "output": "#17becf",
                "kernel": "#9467bd", "block": "#e377c2"}
SYMBOLS = {"conversion": "diamond", "fused conversion": "diamond-open"}
DIAMONDS = set(SYMBOLS)


def _shape(shape: Any) -> str:
    return "x".join(str(s) for s in shape)


def display_graph(graph: "Graph", plan: "Plan") -> nx.DiGraph:
    """The drawn graph: inputs, ops, conversions and outputs as nodes; each edge carries the
    tensor, its stored buffer and layout. Node attributes: kind, label (first line), sub (second
    line), group (kernel), hover."""
    g = nx.DiGraph()
    group = {op: k.name for k in plan.kernels for op in k.ops}
    conv_of = {c.dst: c for c in plan.conversions}
    for name in graph.inputs:
        g.add_node(name, kind="input", label=name, sub="input", group=None,
                   hover=f"input {name} {_shape(graph.tensor(name).shape)}")
    for node in graph.nodes:
        consts = [f"{t}: {_shape(graph.tensor(t).shape)} [{plan.layout_of(t).label}]" for t in node.inputs
                  if graph.tensor(t).role == "const"]
        hover = "<br>".join([f"<b>{node.name}</b> ({node.label}, {node.kind})", f"kernel: {group.get(node.name, '-')}",
                             f"out {_shape(graph.tensor(node.name).shape)} [{plan.layout_of(node.name).label}]", *consts])
        g.add_node(node.name, kind=node.kind, label=node.name, sub=node.label, group=group.get(node.name), hover=hover)

    def source(buf: str) -> str:
        """The node that writes ``buf``: its producer op or input, or the conversion node."""
        if buf in conv_of:
            c = conv_of[buf]
            cname = f"convert {c.tensor}→{buf}"
            if cname not in g:
                lay = plan.buffers[buf].layout
                # a fused conversion is written by its producer's kernel (ALT section 5): no pass of its own
                kind = "fused conversion" if c.fused else "conversion"
                g.add_node(cname, kind=kind, label=f"convert {c.tensor}", sub="", group=group.get(c.into) if c.fused else None,
                           hover=f"<b>{kind}</b> of {c.tensor}<br>to [{lay.label}] {_shape(lay.shape)}<br>{c.reason}")
                _edge(g, graph, plan, source(c.src), cname, c.tensor, c.src)
            return cname
        tensor = plan.buffers[buf].tensor
        prod = graph.producer(tensor)
        return prod.name if prod is not None else tensor

    for node in graph.nodes:
        for t in node.inputs:
            if graph.tensor(t).role == "const":
                continue
            buf = plan.reads.get((node.name, t), t)
            _edge(g, graph, plan, source(buf), node.name, t, buf)
    for tensor, buf in plan.outputs.items():
        out = f"output {tensor}"
        g.add_node(out, kind="output", label=tensor, sub="output", group=None,
                   hover=f"graph output {tensor} {_shape(graph.tensor(tensor).shape)}")
        _edge(g, graph, plan, source(buf), out, tensor, buf)
    return g


def _edge(g: nx.DiGraph, graph: "Graph", plan: "Plan", src: str, dst: str, tensor: str, buf: str) -> None:
    lay = plan.buffers[buf].layout if buf in plan.buffers else plan.layout_of(tensor)
    g.add_edge(src, dst, tensor=tensor, buffer=buf, layout=lay.label, stored=_shape(lay.shape),
               shape=_shape(graph.tensor(tensor).shape))


def collapse_kernels(g: nx.DiGraph, keep: Collection[str] = ()) -> nx.DiGraph:
    """``g`` with every fused kernel of two or more nodes, except those named in ``keep``, drawn
    as one node named after the kernel (the ops it fuses in its hover text). A kernel is a convex
    chain, so the result is still a DAG; edges inside a kernel disappear, the others are kept."""
    members: dict[str, list[str]] = {}
    for n, d in g.nodes(data=True):
        if d.get("group"):
            members.setdefault(d["group"], []).append(n)
    shut = {k: ops for k, ops in members.items() if len(ops) > 1 and k not in keep}
    into = {n: f"kernel {k}" for k, ops in shut.items() for n in ops}
    nodes = {f"kernel {k}": {"kind": "kernel", "label": k, "group": None, "members": tuple(ops),
                             "sub": " + ".join(g.nodes[o]["sub"] or "convert" for o in ops),
                             "hover": f"<b>kernel {k}</b><br>" + "<br>".join(g.nodes[o]["label"] for o in ops)}
             for k, ops in shut.items()}
    return blocks.contract(g, into, nodes)


def backward_view(g: nx.DiGraph, ops: Collection[str], show: bool = True) -> nx.DiGraph:
    """``g`` with the backward pass's ``ops`` marked (node attribute ``backward``), and with what
    only they use: an input only they read (``grad_<output>``), a conversion only they read, a
    graph output one of them writes. ``show`` False leaves all of these out: the forward graph."""
    back = {n for n in ops if n in g}
    for n in reversed(list(nx.topological_sort(g))):  # a conversion after the ops it feeds
        kind = g.nodes[n]["kind"]
        if (kind == "input" or kind in DIAMONDS) and g.out_degree(n) and all(m in back for m in g.successors(n)):
            back.add(n)
        elif kind == "output" and any(m in back for m in g.predecessors(n)):
            back.add(n)
    if not show:
        return g.subgraph([n for n in g if n not in back]).copy()
    for n in back:
        d = g.nodes[n]
        d["backward"] = True
        d["hover"] += "<br><i>backward pass</i>"
    return g


def matching_ops(names: Iterable[str], query: str) -> list[str]:
    """The names that contain ``query`` (case-insensitive); none for an empty query."""
    q = query.strip().lower()
    return [n for n in names if q and q in n.lower()] if q else []



def node_text(d: dict) -> str:
    """A node's drawn text: the name in bold, the operator below; a diamond's text is one line."""
    return d["label"] if d["kind"] in DIAMONDS else f"<b>{d['label']}</b><br>{d['sub']}"


def edge_text(d: dict) -> str:
    return f"{d['tensor']} {d['shape']}<br>[{d['layout']}]"


def kernel_title(name: str) -> str:
    return f"kernel {name}"


########## Repeated blocks by the module they were written as ##########


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".")


def block_labels(found: Sequence[blocks.Block], modules: Mapping[str, str]) -> dict[str, str]:
    """Block name -> the module of the model it was written as: the outermost module whose ops
    all lie in the block (``modules``: op -> the path of the module that runs it, such as
    ``conv4 -> "features.4.body.0"``, for the ops the model names), or the first and last such
    module when the block spans several. A block with no op in ``modules`` is left out.

    >>> b = blocks.Block("block A1", "A", 1, 2, ("conv2", "relu2", "conv3", "add1"), "C2D ×2, relu, add")
    >>> block_labels([b], {"conv1": "stem", "conv2": "layer1.0.conv1", "conv3": "layer1.0.conv2",
    ...                    "conv4": "layer1.1.conv1"})
    {'block A1': 'layer1.0'}
    """
    out = {}
    for b in found:
        inside = set(b.ops)
        names = []
        for op in b.ops:
            if op not in modules:
                continue
            parts = modules[op].split(".")
            prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
            names.append(next((p for p in prefixes if all(o in inside for o, q in modules.items() if _under(q, p))),
                              modules[op]))
        if names := list(dict.fromkeys(names)):
            out[b.name] = names[0] if len(names) == 1 else f"{names[0]} – {names[-1]}"
    return out


def label_blocks(g: nx.DiGraph, labels: Mapping[str, str]) -> nx.DiGraph:
    """``g`` (from ``blocks.collapse_blocks``) with each collapsed block in ``labels`` shown
    under its label (the structure's letter and the occurrence move to its hover text)."""
    for name, label in labels.items():
        if name in g and g.nodes[name]["kind"] == "block":
            d = g.nodes[name]
            d["hover"] = f"<b>{label}</b> ({name})<br>" + d["hover"]
            d["label"] = label
    return g
