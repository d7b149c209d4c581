"""The computational graph under the current layouts, as a Plotly figure.

Ops are nodes coloured by kind, grouped by fused kernel (a shaded box behind each group);
conversion ops the propagation inserted are red diamonds on the edge they sit on; tensors are
edges labelled with their shape and stored layout. Constants are not drawn as nodes (they are
converted ahead of time); their layouts show in the op's hover text.

Input: an engine ``Graph`` and the ``Plan`` that ``propagate.plan_layouts`` returns (duck-typed,
so this module stays free of TVM). ``changed`` names tensors to highlight (those that took a
layout in the last action); ``selected`` is the op the user clicked.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import networkx as nx
import plotly.graph_objects as go

if TYPE_CHECKING:  # engine types, for readers only
    from workbench.engine.graph import Graph
    from workbench.engine.propagate import Plan

__all__ = ["KIND_COLOURS", "display_graph", "graph_figure"]

KIND_COLOURS = {"complex": "#1f77b4", "elementwise": "#2ca02c", "other": "#7f7f7f",
                "conversion": "#d62728", "fused conversion": "#ff9896", "input": "#bcbd22", "output": "#17becf"}
_SYMBOLS = {"conversion": "diamond", "fused conversion": "diamond-open", "input": "triangle-right", "output": "square"}
_GROUP_FILL = "rgba(31, 119, 180, 0.08)"


def _shape(shape: Any) -> str:
    return "x".join(str(s) for s in shape)


def display_graph(graph: "Graph", plan: "Plan") -> nx.DiGraph:
    """The drawn graph: inputs, ops, conversions and outputs as nodes; each edge carries the
    tensor, its stored buffer and layout. Node attributes: kind, label, group, hover."""
    g = nx.DiGraph()
    group = {op: k.name for k in plan.kernels for op in k.ops}
    conv_of = {c.dst: c for c in plan.conversions}
    for name in graph.inputs:
        g.add_node(name, kind="input", label=name, group=None, hover=f"input {name} {_shape(graph.tensor(name).shape)}")
    for node in graph.nodes:
        consts = [f"{t}: {_shape(graph.tensor(t).shape)} [{plan.layout_of(t).label}]" for t in node.inputs
                  if graph.tensor(t).role == "const"]
        hover = "<br>".join([f"<b>{node.name}</b> ({node.label}, {node.kind})", f"kernel: {group.get(node.name, '-')}",
                             f"out {_shape(graph.tensor(node.name).shape)} [{plan.layout_of(node.name).label}]", *consts])
        g.add_node(node.name, kind=node.kind, label=node.name, group=group.get(node.name), hover=hover)

    def source(buf: str) -> str:
        """The node that writes ``buf``: its producer op or input, or the conversion node."""
        if buf in conv_of:
            c = conv_of[buf]
            cname = f"convert {c.tensor}→{buf}"
            if cname not in g:
                lay = plan.buffers[buf].layout
                # a fused conversion is written by its producer's kernel (ALT section 5): no pass of its own
                kind = "fused conversion" if c.fused else "conversion"
                g.add_node(cname, kind=kind, label=f"convert {c.tensor}", group=group.get(c.into) if c.fused else None,
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
        g.add_node(out, kind="output", label=f"{tensor} (output)", group=None,
                   hover=f"graph output {tensor} {_shape(graph.tensor(tensor).shape)}")
        _edge(g, graph, plan, source(buf), out, tensor, buf)
    return g


def _edge(g: nx.DiGraph, graph: "Graph", plan: "Plan", src: str, dst: str, tensor: str, buf: str) -> None:
    lay = plan.buffers[buf].layout if buf in plan.buffers else plan.layout_of(tensor)
    g.add_edge(src, dst, tensor=tensor, buffer=buf, layout=lay.label, stored=_shape(lay.shape),
               shape=_shape(graph.tensor(tensor).shape))


#: beyond this many layers, edge labels go into hover text (except the highlighted ones)
LABEL_LAYERS = 9


def _positions(g: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """Layered left-to-right layout on a unit grid: a node's column is its topological
    generation, nodes of one column are centred on the axis one unit apart."""
    pos = {}
    for layer, nodes in enumerate(nx.topological_generations(g)):
        for i, n in enumerate(sorted(nodes, key=str)):
            pos[n] = (float(layer), (len(nodes) - 1) / 2 - i)
    return pos


def graph_figure(graph: "Graph", plan: "Plan", changed: Collection[str] = (), selected: str | None = None,
                 height: int | None = None) -> go.Figure:
    """The figure; node ``customdata`` is the node name (for click selection). Edge labels
    (tensor, shape, layout) are drawn on small graphs; on large ones they are hover text on
    each edge's midpoint, and only the highlighted edges keep a drawn label."""
    g = display_graph(graph, plan)
    pos = _positions(g)
    layers = 1 + int(max(x for x, _ in pos.values()))
    fig = go.Figure()
    _group_boxes(fig, g, pos)
    for hot in (False, True):
        xs, ys = [], []
        for a, b, d in g.edges(data=True):
            if (d["tensor"] in changed) == hot:
                xs += [pos[a][0], pos[b][0], None]
                ys += [pos[a][1], pos[b][1], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=hot and bool(xs),
                                 name="took the new layout" if hot else "tensor",
                                 line={"color": "#ff7f0e" if hot else "#999", "width": 4 if hot else 1.5}))
    notes = list(fig.layout.annotations)  # the group labels; one add per figure keeps big graphs fast
    for a, b, d in g.edges(data=True):
        if layers > LABEL_LAYERS and d["tensor"] not in changed:
            continue
        notes.append({"x": (pos[a][0] + pos[b][0]) / 2, "y": (pos[a][1] + pos[b][1]) / 2, "showarrow": False,
                      "text": f"{d['tensor']} {d['shape']}<br>[{d['layout']}]", "yshift": 14,
                      "font": {"size": 10, "color": "#e6550d" if d["tensor"] in changed else "#444"},
                      "bgcolor": "rgba(255,255,255,0.7)"})
    for a, b in g.edges():
        notes.append({"x": pos[b][0], "y": pos[b][1], "ax": pos[a][0], "ay": pos[a][1], "xref": "x", "yref": "y",
                      "axref": "x", "ayref": "y", "showarrow": True, "arrowhead": 2, "arrowsize": 1.2,
                      "arrowcolor": "#999", "standoff": 14, "text": ""})
    fig.update_layout(annotations=notes)
    edges = list(g.edges(data=True))
    fig.add_trace(go.Scatter(x=[(pos[a][0] + pos[b][0]) / 2 for a, b, _ in edges],
                             y=[(pos[a][1] + pos[b][1]) / 2 for a, b, _ in edges], mode="markers",
                             marker={"size": 10, "color": "rgba(0,0,0,0)"}, showlegend=False, hoverinfo="text",
                             hovertext=[f"<b>{d['tensor']}</b> {d['shape']}<br>stored [{d['layout']}] {d['stored']}"
                                        for _, _, d in edges]))
    for kind, colour in KIND_COLOURS.items():
        nodes = [n for n, d in g.nodes(data=True) if d["kind"] == kind]
        if not nodes:
            continue
        fig.add_trace(go.Scatter(
            x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], mode="markers+text", name=kind,
            text=[g.nodes[n]["label"] for n in nodes], textposition="bottom center", customdata=nodes,
            hovertext=[g.nodes[n]["hover"] for n in nodes], hoverinfo="text",
            marker={"size": 26 if kind == "complex" else 20, "color": colour, "symbol": _SYMBOLS.get(kind, "circle"),
                    "line": {"width": [4 if n == selected else 1 for n in nodes],
                             "color": ["#000" if n == selected else "#fff" for n in nodes]}}))
    ys = [y for _, y in pos.values()]
    half = (max(ys) - min(ys)) / 2 + 0.8  # a one-row graph stays flat
    fig.update_layout(height=height or int(220 + 120 * (max(ys) - min(ys))), template="plotly_white",
                      clickmode="event+select", dragmode="pan",
                      xaxis={"visible": False, "range": [-0.6, layers - 0.4]},
                      yaxis={"visible": False, "range": [-half, half]},
                      legend={"orientation": "h", "y": -0.05}, margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return fig


def _group_boxes(fig: go.Figure, g: nx.DiGraph, pos: dict[str, tuple[float, float]]) -> None:
    """A shaded box behind each fused kernel of two or more ops."""
    groups: dict[str, list[str]] = {}
    for n, d in g.nodes(data=True):
        if d.get("group"):
            groups.setdefault(d["group"], []).append(n)
    shapes, notes = [], []
    for name, members in groups.items():
        if len(members) < 2:
            continue
        xs, ys = [pos[n][0] for n in members], [pos[n][1] for n in members]
        pad = 0.3
        shapes.append({"type": "rect", "x0": min(xs) - pad, "x1": max(xs) + pad, "y0": min(ys) - pad,
                       "y1": max(ys) + pad, "fillcolor": _GROUP_FILL, "layer": "below",
                       "line": {"color": "rgba(31,119,180,0.4)", "dash": "dot"}})
        notes.append({"x": (min(xs) + max(xs)) / 2, "y": max(ys) + pad, "text": f"kernel {name}",
                      "showarrow": False, "yshift": 8, "font": {"size": 10, "color": "#1f77b4"}})
    fig.update_layout(shapes=shapes, annotations=notes)
