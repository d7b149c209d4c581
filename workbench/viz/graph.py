"""The computational graph under the current layouts, as a Plotly figure drawn like Netron.

Data flows top to bottom: ops are boxes coloured by kind, a fused kernel is a dotted box around
its ops, conversion ops are diamonds on their edge, and every edge is labelled with its tensor,
shape and stored layout. igraph's Sugiyama layout places the vertices (edge labels are vertices
of their own, as in Graphviz); this module turns its grid into pixels, one data unit a screen
pixel, so that text sized in pixels can be laid out in data units.

Input: an engine ``Graph`` and the ``Plan`` of ``propagate.plan_layouts`` (duck-typed, so no
TVM here); ``changed``, ``selected`` and ``search`` highlight tensors and ops; fused kernels and
repeated blocks can each be drawn as one node. ``graph_figure(..., fit=(width, height))`` draws
the whole graph scaled into a chart of that size with only the labels that have room (Plotly
keeps text at its pixel size whatever the zoom); hover text keeps everything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import igraph
import networkx as nx
import plotly.graph_objects as go

from workbench.viz import blocks

if TYPE_CHECKING:  # engine types, for readers only
    from workbench.engine.graph import Graph
    from workbench.engine.propagate import Plan

__all__ = ["FIT", "KIND_COLOURS", "Box", "GraphGeometry", "chart_width", "collapse_kernels", "display_graph",
           "graph_figure", "graph_geometry", "matching_ops", "text_size"]

KIND_COLOURS = {"complex": "#1f77b4", "elementwise": "#2ca02c", "other": "#7f7f7f", "opaque": "#8c564b",
                "conversion": "#d62728", "fused conversion": "#ff9896", "input": "#bcbd22", "output": "#17becf",
                "kernel": "#9467bd", "block": "#e377c2"}
_SYMBOLS = {"conversion": "diamond", "fused conversion": "diamond-open"}
_DIAMONDS = set(_SYMBOLS)
HOT = "#ff7f0e"        # edges and labels of tensors that took the new layout
FOUND = "#e6ab02"      # outline of the ops a search matched
KERNEL_LINE = "rgba(31,119,180,0.55)"
KERNEL_FILL = "rgba(31,119,180,0.06)"

########## Text extents ##########

#: Arial's metrics (Liberation Sans has the same ones): estimates in pixels hold for these fonts
FONT = "Arial, 'Liberation Sans', Helvetica, sans-serif"
NODE_FONT = 11
EDGE_FONT = 10
#: average advance of one character, in em; generous for Arial (digits are 0.556 em)
CHAR_EM, BOLD_EM = 0.6, 0.66
LINE_EM = 1.25
_TAG = re.compile(r"<[^>]+>")


def text_size(text: str, size: float) -> tuple[float, float]:
    """Estimated (width, height) in pixels of Plotly's pseudo-HTML ``text`` at font ``size``.

    >>> text_size("<b>conv1</b><br>C2D", 10)
    (33.0, 25.0)
    """
    lines = text.split("<br>")
    width = max(len(_TAG.sub("", line)) * (BOLD_EM if "<b>" in line else CHAR_EM) for line in lines)
    return round(width * size, 2), round(len(lines) * LINE_EM * size, 2)


########## The drawn graph ##########


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


def matching_ops(names: Iterable[str], query: str) -> list[str]:
    """The names that contain ``query`` (case-insensitive); none for an empty query."""
    q = query.strip().lower()
    return [n for n in names if q and q in n.lower()] if q else []


########## Geometry: igraph's Sugiyama layout, in pixels ##########

BOX_PAD_X, BOX_PAD_Y = 8, 4  # inside a node box, around its text
GAP_X = 18          # between the extents of two neighbours in a row
GAP_Y = 14          # between two rows: the only place where edges bend
LANE = 5            # half the room kept around an edge passing through a row
LABEL_DX = 6        # an edge label starts this far right of its edge
LABEL_PAD = 3       # the label's white background reaches this far around its text
PORT_STEP = 12      # between two edges leaving (or entering) the same box
DIAMOND = 16        # a conversion's marker size
STUB = 6            # the straight end of an edge above its arrowhead
KERNEL_PAD = 7      # a kernel box around its members
MARGIN = 12         # around the drawing


class Box(NamedTuple):
    x0: float
    x1: float
    y0: float  # bottom
    y1: float  # top


class GraphGeometry(NamedTuple):
    """Where everything goes, in pixels (y grows upwards; the first layer is at the top)."""

    centres: dict[str, tuple[float, float]]
    boxes: dict[str, Box]  # a node's box (a conversion: its diamond's square)
    texts: dict[str, tuple[float, float]]  # a node's text anchor: the centre, or left-middle for a diamond
    routes: dict[tuple[str, str], list[tuple[float, float]]]  # an edge's polyline, source to target
    labels: dict[tuple[str, str], tuple[float, float]]  # an edge label's left-middle anchor
    kernels: dict[str, list[tuple[float, float]]]  # a kernel's outline: a closed staircase around its rows
    titles: dict[str, tuple[float, float]]  # a kernel title's left-middle anchor
    bounds: Box  # everything drawn, text included


class _Ext(NamedTuple):
    """A vertex's extent from its centre."""

    left: float
    right: float
    top: float
    bottom: float


def _node_text(d: dict) -> str:
    """A node's drawn text: the name in bold, the operator below; a diamond's text is one line."""
    return d["label"] if d["kind"] in _DIAMONDS else f"<b>{d['label']}</b><br>{d['sub']}"


def _edge_text(d: dict) -> str:
    return f"{d['tensor']} {d['shape']}<br>[{d['layout']}]"


def _node_ext(d: dict) -> _Ext:
    w, h = text_size(_node_text(d), NODE_FONT)
    if d["kind"] in _DIAMONDS:
        half = max(DIAMOND, h) / 2
        return _Ext(DIAMOND / 2, DIAMOND / 2 + 4 + w, half, half)
    return _Ext(w / 2 + BOX_PAD_X, w / 2 + BOX_PAD_X, h / 2 + BOX_PAD_Y, h / 2 + BOX_PAD_Y)


def _kernel_title(name: str) -> str:
    return f"kernel {name}"


class _Grid(NamedTuple):
    """igraph's answer: each vertex's row and x on a unit grid, and each edge's dummy vertices."""

    rows: dict[Any, int]
    x: dict[Any, float]
    dummies: dict[tuple[str, str], list[tuple[float, int]]]  # (x, row) of each, source to target


def _sugiyama(g: nx.DiGraph) -> _Grid:
    """Sugiyama layout of ``g`` with each edge passing through a vertex for its label: a node on
    an even row (its topological generation), an edge's label on the odd row right above its
    consumer, so a skip connection runs its own lane down to where it joins."""
    gen = {n: i for i, layer in enumerate(nx.topological_generations(g)) for n in layer}
    edges = list(g.edges())
    names = list(g.nodes) + edges
    index = {v: i for i, v in enumerate(names)}
    rows = [2 * gen[n] for n in g.nodes] + [2 * gen[b] - 1 for _, b in edges]
    halves = [(index[a], index[(a, b)]) for a, b in edges] + [(index[(a, b)], index[b]) for a, b in edges]
    lay = igraph.Graph(n=len(names), edges=halves, directed=True).layout_sugiyama(layers=rows)
    bends = [[(float(x), int(round(r))) for x, r in pts] for pts in lay.edge_routing]
    return _Grid(rows=dict(zip(names, rows)), x={v: x for v, (x, _) in zip(names, lay.coords)},
                 dummies={e: bends[i] + bends[len(edges) + i] for i, e in enumerate(edges)})


def graph_geometry(g: nx.DiGraph) -> GraphGeometry:
    """Lay ``g`` out top to bottom: ``_sugiyama``, then pixel sizes (see the module docstring)."""
    if not g:
        return GraphGeometry({}, {}, {}, {}, {}, {}, {}, Box(0, 0, 0, 0))
    grid = _sugiyama(g)
    edges = list(g.edges())
    names = list(g.nodes) + edges
    ext: dict[Any, _Ext] = {n: _node_ext(d) for n, d in g.nodes(data=True)}
    for e in edges:
        w, h = text_size(_edge_text(g.edges[e]), EDGE_FONT)
        ext[e] = _Ext(LANE, LABEL_DX + w + 2 * LABEL_PAD, h / 2 + LABEL_PAD, h / 2 + LABEL_PAD)
    members = _kernel_members(g)
    top_of = {k: min(vs, key=lambda v: (grid.rows[v], grid.x[v])) for k, vs in members.items()}
    for k, top in top_of.items():  # room for the kernel's title right of its first box
        e, tw = ext[top], text_size(_kernel_title(k), EDGE_FONT)[0]
        ext[top] = e._replace(top=e.top + EDGE_FONT * LINE_EM, right=max(e.right, e.left + 6 + tw))

    # every vertex of a row, dummies included, as (grid x, extent)
    by_row: dict[int, list[tuple[float, _Ext]]] = {}
    for v in names:
        by_row.setdefault(grid.rows[v], []).append((grid.x[v], ext[v]))
    for pts in grid.dummies.values():
        for x, r in pts:
            by_row.setdefault(r, []).append((x, _Ext(LANE, LANE, 0, 0)))
    column = _columns(by_row)
    row_y, row_top, row_bottom = _rows(by_row)

    centres = {v: (column[_key(grid.x[v])], row_y[grid.rows[v]]) for v in names}
    boxes, texts = {}, {}
    for n, d in g.nodes(data=True):
        x, y = centres[n]
        if d["kind"] in _DIAMONDS:
            boxes[n] = Box(x - DIAMOND / 2, x + DIAMOND / 2, y - DIAMOND / 2, y + DIAMOND / 2)
            texts[n] = (x + DIAMOND / 2 + 4, y)
        else:
            e = _node_ext(d)
            boxes[n] = Box(x - e.left, x + e.right, y - e.bottom, y + e.top)
            texts[n] = (x, y)
    lanes = {}  # an edge's points between its ends, (x, top, bottom) per row: its dummies and its label
    for e in edges:
        via = [(column[_key(x)], r) for x, r in grid.dummies[e]] + [(centres[e][0], grid.rows[e])]
        lanes[e] = [(x, row_y[r] + row_top[r], row_y[r] - row_bottom[r]) for x, r in sorted(via, key=lambda p: p[1])]
    routes = _routes(g, boxes, lanes, {n: row_y[grid.rows[n]] - row_bottom[grid.rows[n]] for n in g},
                     {n: row_y[grid.rows[n]] + row_top[grid.rows[n]] for n in g})
    labels = {e: (centres[e][0] + LABEL_DX, centres[e][1]) for e in edges}

    span = {v: Box(centres[v][0] - ext[v].left, centres[v][0] + ext[v].right, centres[v][1] - ext[v].bottom,
                   centres[v][1] + ext[v].top) for v in names}
    kernels = {k: _staircase([span[v] for v in vs], [grid.rows[v] for v in vs]) for k, vs in members.items()}
    titles = {k: (boxes[top].x1 + 6, boxes[top].y1 + EDGE_FONT * LINE_EM / 2) for k, top in top_of.items()}
    corners = [(b.x0, b.y0) for b in span.values()] + [(b.x1, b.y1) for b in span.values()]
    corners += [p for outline in kernels.values() for p in outline]
    bounds = Box(min(x for x, _ in corners), max(x for x, _ in corners), min(y for _, y in corners),
                 max(y for _, y in corners))
    return GraphGeometry(centres={n: centres[n] for n in g.nodes}, boxes=boxes, texts=texts, routes=routes,
                         labels=labels, kernels=kernels, titles=titles, bounds=bounds)


def _key(x: float) -> float:
    return round(x, 6)


def _kernel_members(g: nx.DiGraph) -> dict[str, list]:
    """Kernel -> its nodes and the labels of the edges between them (kernels of two or more)."""
    nodes: dict[str, list] = {}
    for n, d in g.nodes(data=True):
        if d.get("group"):
            nodes.setdefault(d["group"], []).append(n)
    return {k: ns + [(a, b) for a, b in g.subgraph(ns).edges()] for k, ns in nodes.items() if len(ns) > 1}


def _staircase(spans: list[Box], rows: list[int]) -> list[tuple[float, float]]:
    """A closed outline around ``spans`` that follows each row's width (a bounding box would
    take in the lanes of edges passing beside a kernel); rows step in the middle of their gap."""
    band: dict[int, Box] = {}
    for b, r in zip(spans, rows):
        o = band.get(r, b)
        band[r] = Box(min(o.x0, b.x0), max(o.x1, b.x1), min(o.y0, b.y0), max(o.y1, b.y1))
    order = sorted(band)
    steps = [(band[a].y0 + band[b].y1) / 2 for a, b in zip(order, order[1:])]
    tops = [band[order[0]].y1 + KERNEL_PAD, *steps]
    bottoms = [*steps, band[order[-1]].y0 - KERNEL_PAD]
    ranks = list(zip(order, tops, bottoms))
    right = [p for r, t, b in ranks for p in ((band[r].x1 + KERNEL_PAD, t), (band[r].x1 + KERNEL_PAD, b))]
    left = [p for r, t, b in ranks[::-1] for p in ((band[r].x0 - KERNEL_PAD, b), (band[r].x0 - KERNEL_PAD, t))]
    return right + left + [right[0]]


def _columns(by_row: dict[int, list[tuple[float, _Ext]]]) -> dict[float, float]:
    """Pixel x of each of igraph's x values: a monotone map (so what igraph aligned stays aligned)
    in which neighbours of every row keep ``GAP_X`` between their extents. The least and the
    greatest such positions are both feasible, so is their mean, which centres loose columns."""
    xs = sorted({_key(x) for vs in by_row.values() for x, _ in vs})
    need: dict[tuple[float, float], float] = {}
    for vs in by_row.values():
        vs = sorted(vs, key=lambda v: v[0])
        for (xa, ea), (xb, eb) in zip(vs, vs[1:]):
            pair = (_key(xa), _key(xb))
            if pair[0] != pair[1]:
                need[pair] = max(need.get(pair, 0.0), ea.right + GAP_X + eb.left)
    lo = {xs[0]: 0.0}
    for a, b in zip(xs, xs[1:]):
        lo[b] = max([lo[a] + 1] + [lo[p] + d for (p, q), d in need.items() if q == b])
    hi = {xs[-1]: lo[xs[-1]]}
    for a, b in zip(reversed(xs[:-1]), reversed(xs[1:])):
        hi[a] = min([hi[b] - 1] + [hi[q] - d for (p, q), d in need.items() if p == a])
    return {x: (lo[x] + hi[x]) / 2 for x in xs}


def _rows(by_row: dict[int, list[tuple[float, _Ext]]]) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
    """Each row's centre y (downwards from 0) and how far it reaches above and below it."""
    y, top, bottom = {}, {}, {}
    cursor = 0.0
    for r in range(max(by_row) + 1):
        vs = by_row.get(r, [])
        top[r] = max((e.top for _, e in vs), default=0.0)
        bottom[r] = max((e.bottom for _, e in vs), default=0.0)
        y[r] = cursor - top[r]
        cursor = y[r] - bottom[r] - GAP_Y
    return y, top, bottom


def _routes(g: nx.DiGraph, boxes: dict[str, Box], lanes: dict[tuple[str, str], list[tuple[float, float, float]]],
            row_bottom: dict[str, float], row_top: dict[str, float]) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Polylines: out of the source box's bottom, straight down through every row the edge
    crosses (its lane), into the target box's top; a box with several edges spreads them over
    ports ordered like their lanes, so they do not cross at the box. ``row_bottom`` and
    ``row_top``: how far the row of each node reaches."""
    ports: dict[tuple[str, str], list[float]] = {}
    for n in g.nodes:
        b = boxes[n]
        for side, es, lane_x in ((0, list(g.out_edges(n)), lambda e: lanes[e][0][0]),
                                 (1, list(g.in_edges(n)), lambda e: lanes[e][-1][0])):
            es.sort(key=lane_x)
            step = 0.0 if g.nodes[n]["kind"] in _DIAMONDS else min(PORT_STEP, (b.x1 - b.x0 - 16) / max(len(es), 1))
            for i, e in enumerate(es):
                ports.setdefault(e, [0.0, 0.0])[side] = (b.x0 + b.x1) / 2 + (i - (len(es) - 1) / 2) * step
    routes = {}
    for (a, b), lane in lanes.items():
        xa, xb = ports[(a, b)]
        pts = [(xa, boxes[a].y0), (xa, row_bottom[a] - STUB)]
        for x, top, bottom in lane:
            pts += [(x, top), (x, bottom)]
        pts += [(xb, row_top[b] + STUB), (xb, boxes[b].y1)]
        routes[(a, b)] = [p for i, p in enumerate(pts) if i == 0 or p != pts[i - 1]]
    return routes


########## The figure ##########

#: the figure's height cap in pixels: a taller graph opens on a window of it (pan, or fit it to the chart)
VIEW_MAX = 1000
#: the narrowest chart the page draws (the legend needs it); Plotly widens a narrower drawing's x range
MIN_CHART = 320
#: a row of the legend above the plot, in pixels, and the room of an entry besides its name's text
LEGEND_ROW, LEGEND_ENTRY = 29, 44
#: the largest chart the fit view draws into (width, height in pixels): the room beside the side
#: panel on a 1400-pixel wide window with the sidebar open (about 590 pixels)
FIT = (560, VIEW_MAX)


def graph_figure(graph: "Graph", plan: "Plan", changed: Collection[str] = (), selected: str | None = None,
                 height: int | None = None, search: str = "", focus: str | None = None, collapse: bool = False,
                 expanded: Collection[str] = (), collapse_blocks: bool = False,
                 found: Sequence["blocks.Block"] | None = None, fit: tuple[int, int] | None = None) -> go.Figure:
    """The figure. Node ``customdata`` is the node name (for click selection); every edge label
    is a layout annotation; the edge traces carry ``customdata`` ``"a→b"`` on each point of the
    edge's polyline. ``collapse`` draws each fused kernel, ``collapse_blocks`` each repeated block
    (``blocks.find_blocks``), as one node, except those named in ``expanded``. The view opens on
    the whole graph when it fits ``height`` (default ``VIEW_MAX``) at one pixel per unit, else on
    the part around ``focus`` (default: the first search match, else the selected op). ``found``:
    the blocks ``find_blocks`` gave for this graph, when the caller has them already. ``fit``: a
    chart's (width, height) in pixels: the whole graph scaled down into it (never up), with the
    labels that have room at that scale (see the module docstring)."""
    g = display_graph(graph, plan)
    if collapse_blocks:  # first: blocks are found on the ops, and a collapsed block takes its kernels with it
        g = blocks.collapse_blocks(g, blocks.find_blocks(g) if found is None else found, expanded)
    if collapse:
        g = collapse_kernels(g, expanded)
    geo = graph_geometry(g)
    layout = {"template": "plotly_white", "font": {"family": FONT}, "dragmode": "pan", "clickmode": "event+select",
              "modebar": {"orientation": "v"},  # beside the drawing, not over the legend
              "margin": {"l": 0, "r": 0, "t": 28, "b": 0}, "showlegend": True,
              "legend": {"orientation": "h", "x": 0, "y": 1, "yanchor": "bottom", "font": {"size": 10}}}
    if not g:
        return go.Figure(data=[], layout=layout)
    found = _found(g, search)
    b = geo.bounds
    if fit:
        scale, xrange, yrange = _fit_view(b, *fit)
        plot_h = round((yrange[1] - yrange[0]) * scale)
    else:
        scale, full_h = 1.0, b.y1 - b.y0 + 2 * MARGIN
        view_h = min(full_h, height or VIEW_MAX)
        focus = next((n for n in [focus, *sorted(found), selected] if n in geo.centres), None)
        top = b.y1 + MARGIN
        if focus and view_h < full_h:  # open around the op the user is looking for
            top = min(top, max(b.y0 - MARGIN + view_h, geo.centres[focus][1] + view_h / 2))
        xrange, yrange, plot_h = (b.x0 - MARGIN, b.x1 + MARGIN), (top - view_h, top), int(view_h)
    # a selected op inside a collapsed kernel or block outlines the node that holds it
    holder = [n for n, d in g.nodes(data=True) if selected in d.get("members", ())]
    text = _drawn_texts(g, geo, scale, Box(*xrange, *yrange), first=[selected, *holder, *sorted(found)], hot=changed)
    if fit:  # as wide as the drawing and the labels kept (in pixels: MARGIN around them), no wider than asked
        left, right = min(b.x0, text.span[0]) - MARGIN / scale, max(b.x1, text.span[1]) + MARGIN / scale
        xrange = (max(xrange[0], left), min(xrange[1], right))
    traces = (_kernel_fills(geo) + _node_boxes(g, geo) + _edge_traces(g, geo, changed, scale)
              + _node_marks(g, geo, selected, holder, found, text, scale))
    notes = [{"x": x, "y": y, "text": _kernel_title(k), "showarrow": False, "xanchor": "left", "yanchor": "middle",
              "font": {"size": EDGE_FONT, "color": KERNEL_LINE}}
             for k, (x, y) in geo.titles.items() if k in text.titles]
    notes += [{"x": x, "y": y, "text": text.edges[e], "showarrow": False, "xanchor": "left", "yanchor": "middle",
               "align": "left", "borderpad": 1, "bgcolor": "rgba(255,255,255,0.85)",
               "font": {"size": EDGE_FONT, "color": HOT if g.edges[e]["tensor"] in changed else "#444"}}
              for e, (x, y) in geo.labels.items() if e in text.edges]
    # the legend's rows above the plot (Plotly's automargin would take them from the plot, and the scale)
    legend_h = LEGEND_ROW * _legend_rows([t["name"] for t in traces if t.get("showlegend", True) and t.get("name")],
                                         max(round((xrange[1] - xrange[0]) * scale), MIN_CHART))
    layout |= {
        "height": plot_h + legend_h, "margin": {"l": 0, "r": 0, "t": legend_h, "b": 0}, "annotations": notes,
        "hovermode": "closest",
        # one unit is `scale` pixels (one, but when fitted): the x range widens on a wide screen, never the text
        "xaxis": {"visible": False, "range": list(xrange), "constrain": "range"},
        "yaxis": {"visible": False, "range": list(yrange), "scaleanchor": "x", "scaleratio": 1},
        # keep the user's pan and zoom until the focus changes, or the view is fitted or no longer
        "uirevision": f"{focus}" + " (fit)" * bool(fit),
    }
    return go.Figure(data=traces, layout=layout)


def chart_width(fig: go.Figure) -> int:
    """The pixels ``graph_figure``'s x range takes at its scale (its y range fills the plot's
    height), at least ``MIN_CHART``: a chart this wide shows it as drawn (the legend's rows as the
    figure counted them); a wider one adds room on both sides."""
    lay = fig.layout
    if not lay.xaxis.range or not lay.yaxis.range:
        return MIN_CHART
    (x0, x1), (y0, y1) = lay.xaxis.range, lay.yaxis.range
    return max(round((x1 - x0) * (lay.height - lay.margin.t - lay.margin.b) / (y1 - y0)), MIN_CHART)


def _legend_rows(names: Iterable[str], width: float) -> int:
    """How many rows Plotly's horizontal legend takes for ``names`` in a chart ``width`` wide."""
    rows, used = 1, 0.0
    for name in dict.fromkeys(names):
        entry = LEGEND_ENTRY + text_size(name, 10)[0]
        if used and used + entry > width:
            rows, used = rows + 1, 0.0
        used += entry
    return rows


def _fit_view(b: Box, width: int, height: int) -> tuple[float, tuple[float, float], tuple[float, float]]:
    """The scale (pixels per unit, at most 1) that shows ``b`` and a ``MARGIN`` of pixels around
    it in a ``width`` x ``height`` chart, and the axes' ranges: the chart's width, centred on the
    drawing (labels may take it; ``graph_figure`` trims what they leave), by the drawing's height
    (the chart no taller than the drawing needs)."""
    scale = min(1.0, (width - 2 * MARGIN) / max(b.x1 - b.x0, 1), (height - 2 * MARGIN) / max(b.y1 - b.y0, 1))
    plot_h = min(height, math.ceil((b.y1 - b.y0) * scale + 2 * MARGIN))
    cx, cy = (b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2
    return scale, (cx - width / 2 / scale, cx + width / 2 / scale), (cy - plot_h / 2 / scale, cy + plot_h / 2 / scale)


########## Labels that have room ##########

#: the order in which op names claim room in a fitted view: collapsed groups and the heavy ops first
_NAME_RANK = {"block": 0, "kernel": 0, "complex": 0, "input": 1, "output": 1, "opaque": 1, "other": 2,
              "elementwise": 2, "conversion": 3, "fused conversion": 3}
LABEL_GAP = 2  # pixels kept clear around each label of a fitted view
BESIDE = 3  # pixels between a box and its name moved beside it
_CELL = 64  # pixels: the side of a bucket of ``_Room``


class _Texts(NamedTuple):
    """The texts to draw: a node's, an edge label's (by edge), the kernels whose title shows, the
    nodes whose text moved beside their box (x of its anchor, Plotly's textposition), and how far
    left and right (x in units) the texts reach."""

    nodes: dict[str, str]
    edges: dict[tuple[str, str], str]
    titles: set[str]
    places: dict[str, tuple[float, str]]
    span: tuple[float, float] = (math.inf, -math.inf)


class _Room:
    """Pixel boxes of the labels kept so far, bucketed by ``_CELL`` squares so that a new label is
    checked against its neighbours only; a label must also lie inside ``frame``."""

    def __init__(self, frame: Box) -> None:
        self.frame, self.cells = frame, {}
        self.left, self.right = math.inf, -math.inf  # how far the kept boxes reach

    def _cells(self, b: Box) -> list[tuple[int, int]]:
        return [(i, j) for i in range(int(b.x0 // _CELL), int(b.x1 // _CELL) + 1)
                for j in range(int(b.y0 // _CELL), int(b.y1 // _CELL) + 1)]

    def occupy(self, key: Any, b: Box) -> None:
        """Hold ``b`` for ``key`` unchecked (a drawn op's box: only its own name may go on it)."""
        for c in self._cells(b):
            self.cells.setdefault(c, []).append((key, b))

    def take(self, key: Any, b: Box) -> bool:
        """Keep ``b`` if it is inside the frame and clear of every kept box but ``key``'s own."""
        f = self.frame
        if b.x0 < f.x0 or b.x1 > f.x1 or b.y0 < f.y0 or b.y1 > f.y1:
            return False
        cells = self._cells(b)
        if any(k != key and o.x0 < b.x1 and b.x0 < o.x1 and o.y0 < b.y1 and b.y0 < o.y1
               for c in cells for k, o in self.cells.get(c, ())):
            return False
        for c in cells:
            self.cells.setdefault(c, []).append((key, b))
        self.left, self.right = min(self.left, b.x0), max(self.right, b.x1)
        return True


def _text_box(x: float, y: float, text: str, size: float, position: str) -> Box:
    """The pixel box of ``text`` at pixel (``x``, ``y``) and Plotly's textposition ``position``:
    "middle right" starts it there, "middle left" ends it there, "middle center" centres it."""
    w, h = text_size(text, size)
    x0 = {"middle right": x, "middle left": x - w}.get(position, x - w / 2)
    return Box(x0 - LABEL_GAP, x0 + w + LABEL_GAP, y - h / 2 - LABEL_GAP, y + h / 2 + LABEL_GAP)


def _drawn_texts(g: nx.DiGraph, geo: GraphGeometry, scale: float, view: Box, first: Sequence[str | None],
                 hot: Collection[str]) -> _Texts:
    """Every label in full at one pixel per unit (the geometry gave each its room). Scaled down,
    greedily, each in a box clear of those kept before it and inside ``view``: the op names (the
    nodes in ``first``, then by ``_NAME_RANK``; on its box, else beside it, left or right: a
    column of ops has room on its sides), the edges' tensors and shapes (those in ``hot`` first),
    kernel titles, then the edges' layouts and the ops' operators as a second line. A short
    text's box lies inside its long one's (same anchor), so a text grows in place."""
    full = _Texts({n: _node_text(d) for n, d in g.nodes(data=True)}, {e: _edge_text(d) for e, d in g.edges.items()},
                  set(geo.titles), {})  # the geometry's bounds take them in
    if scale >= 1:
        return full
    room = _Room(Box(view.x0 * scale, view.x1 * scale, view.y0 * scale, view.y1 * scale))
    for n, b in geo.boxes.items():  # a name beside its box, or an edge's label, stays off other ops' boxes
        room.occupy(n, Box(b.x0 * scale, b.x1 * scale, b.y0 * scale, b.y1 * scale))
    rank = {n: i for i, n in enumerate(n for n in first if n in g)}
    order = sorted(g.nodes, key=lambda n: (rank.get(n, len(rank)), _NAME_RANK.get(g.nodes[n]["kind"], 2)))
    out = _Texts({}, {}, set(), {})

    def places(n: str, text: str) -> list[tuple[float, str]]:
        """Where a node's text may go: on its box when it fits there, else beside it (left first: edge
        labels start right of their edge), else on it all the same; a diamond's is beside it."""
        if g.nodes[n]["kind"] in _DIAMONDS:
            return [(geo.texts[n][0], "middle right")]
        b, on = geo.boxes[n], (geo.texts[n][0], "middle center")
        beside = [(b.x0 - BESIDE / scale, "middle left"), (b.x1 + BESIDE / scale, "middle right")]
        return [on, *beside] if text_size(text, NODE_FONT)[0] <= (b.x1 - b.x0) * scale else [*beside, on]

    def node_box(n: str, text: str, place: tuple[float, str]) -> Box:
        return _text_box(place[0] * scale, geo.texts[n][1] * scale, text, NODE_FONT, place[1])

    def edge_box(e: tuple[str, str], text: str) -> Box:
        x, y = geo.labels[e]
        return _text_box(x * scale, y * scale, text, EDGE_FONT, "middle right")

    for n in order:
        name = full.nodes[n].split("<br>")[0]
        if place := next((p for p in places(n, name) if room.take(n, node_box(n, name, p))), None):
            out.nodes[n], out.places[n] = name, place
    edges = sorted(geo.labels, key=lambda e: g.edges[e]["tensor"] not in hot)
    for e in edges:
        line = full.edges[e].split("<br>")[0]
        if room.take(e, edge_box(e, line)):
            out.edges[e] = line
    for k, (x, y) in geo.titles.items():
        if room.take(("title", k), _text_box(x * scale, y * scale, _kernel_title(k), EDGE_FONT, "middle right")):
            out.titles.add(k)
    for e in [e for e in edges if e in out.edges]:
        if room.take(e, edge_box(e, full.edges[e])):
            out.edges[e] = full.edges[e]
    for n in [n for n in order if n in out.nodes and full.nodes[n] != out.nodes[n]]:
        if room.take(n, node_box(n, full.nodes[n], out.places[n])):
            out.nodes[n] = full.nodes[n]
    return out._replace(span=(room.left / scale, room.right / scale))


def _scatter(**trace: Any) -> dict:
    """A scatter trace as a plain dict: ``go.Figure`` validates it once (a ``go.Scatter`` would be
    validated, then copied and validated again, a third of a 150-op figure's build time)."""
    return {"type": "scatter", **trace}


def _found(g: nx.DiGraph, search: str) -> set[str]:
    """The drawn ops (and collapsed kernels holding one) whose name contains ``search``."""
    ops = [n for n, d in g.nodes(data=True) if d["kind"] not in ("output", *_DIAMONDS)]
    return {n for n in ops if matching_ops([n, *g.nodes[n].get("members", ())], search)}


def _polygons(rects: Iterable[Box]) -> tuple[list, list]:
    """Closed outlines of ``rects`` as one trace's x and y (None between two)."""
    xs, ys = [], []
    for r in rects:
        xs += [r.x0, r.x1, r.x1, r.x0, r.x0, None]
        ys += [r.y0, r.y0, r.y1, r.y1, r.y0, None]
    return xs, ys


def _tint(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _kernel_fills(geo: GraphGeometry) -> list[dict]:
    if not geo.kernels:
        return []
    xs = [x for outline in geo.kernels.values() for x in [*(p[0] for p in outline), None]]
    ys = [y for outline in geo.kernels.values() for y in [*(p[1] for p in outline), None]]
    return [_scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=KERNEL_FILL, name="fused kernel",
                       line={"color": KERNEL_LINE, "dash": "dot", "width": 1}, hoverinfo="skip")]


def _node_boxes(g: nx.DiGraph, geo: GraphGeometry) -> list[dict]:
    """A filled box per node, one trace per kind (its legend entry); diamonds are markers."""
    out = []
    for kind, colour in KIND_COLOURS.items():
        nodes = [n for n, d in g.nodes(data=True) if d["kind"] == kind and kind not in _DIAMONDS]
        if nodes:
            xs, ys = _polygons(geo.boxes[n] for n in nodes)
            out.append(_scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=_tint(colour, 0.18), name=kind,
                                  legendgroup=kind, line={"color": colour, "width": 1.5}, hoverinfo="skip"))
    return out


def _edge_traces(g: nx.DiGraph, geo: GraphGeometry, changed: Collection[str], scale: float = 1.0) -> list[dict]:
    """The edges' polylines and arrowheads (``scale``d with the drawing), plain and highlighted,
    and an invisible hover point on each label, drawn or not (the stored shape)."""
    out = []
    for hot in (False, True):
        xs, ys, ids, tips = [], [], [], []
        for e, pts in geo.routes.items():
            if (g.edges[e]["tensor"] in changed) != hot:
                continue
            xs += [x for x, _ in pts] + [None]
            ys += [y for _, y in pts] + [None]
            ids += [f"{e[0]}→{e[1]}"] * len(pts) + [None]
            tips.append(pts[-1])
        if not xs:
            continue
        colour, width = (HOT, 3.5) if hot else ("#8c8c8c", 1.3)
        name = "took the new layout" if hot else "tensor"
        out.append(_scatter(x=xs, y=ys, customdata=ids, mode="lines", name=name, legendgroup=name, showlegend=hot,
                              hoverinfo="skip", line={"color": colour, "width": width}))
        out.append(_scatter(x=[x for x, _ in tips], y=[y + 4 for _, y in tips], mode="markers", legendgroup=name,
                              showlegend=False, hoverinfo="skip",
                              marker={"symbol": "triangle-down", "size": max(4.0, (7 + width) * scale),
                                      "color": colour}))
    labels = list(geo.labels.items())
    out.append(_scatter(x=[x + 20 for _, (x, _) in labels], y=[y for _, (_, y) in labels], mode="markers",
                          marker={"size": 14, "color": "rgba(0,0,0,0)"}, showlegend=False, hoverinfo="text",
                          hovertext=[f"<b>{g.edges[e]['tensor']}</b> {g.edges[e]['shape']}<br>stored "
                                     f"[{g.edges[e]['layout']}] {g.edges[e]['stored']}" for e, _ in labels]))
    return out


def _node_marks(g: nx.DiGraph, geo: GraphGeometry, selected: str | None, holder: list[str], found: set[str],
                texts: _Texts, scale: float = 1.0) -> list[dict]:
    """Click targets with hover text (invisible squares over boxes; the diamonds themselves), the
    node ``texts`` (those left out have no room; some moved beside their box), and outlines of
    the selected op (or of the ``holder`` that draws it) and of the search matches; marks
    ``scale`` with the drawing."""
    keep = {"marker": {"opacity": 1}}  # a click selects one point: do not fade the others
    out = []
    for kind, colour in KIND_COLOURS.items():
        nodes = [n for n, d in g.nodes(data=True) if d["kind"] == kind]
        if not nodes:
            continue
        diamond = kind in _DIAMONDS
        sizes = [max(6.0, scale * (DIAMOND if diamond else min(geo.boxes[n].y1 - geo.boxes[n].y0,
                                                                 geo.boxes[n].x1 - geo.boxes[n].x0))) for n in nodes]
        out.append(_scatter(
            x=[geo.centres[n][0] for n in nodes], y=[geo.centres[n][1] for n in nodes], mode="markers", name=kind,
            legendgroup=kind, showlegend=diamond, customdata=nodes, hovertext=[g.nodes[n]["hover"] for n in nodes],
            hoverinfo="text", unselected=keep, selected=keep,
            marker={"size": sizes, "symbol": _SYMBOLS.get(kind, "square"), "color": colour if diamond else "rgba(0,0,0,0)",
                    "line": {"width": 2 if diamond else 0, "color": colour}}))
    nodes = [n for n in g.nodes if n in texts.nodes]
    place = {n: texts.places.get(n) or (geo.texts[n][0], "middle right" if g.nodes[n]["kind"] in _DIAMONDS
                                        else "middle center") for n in nodes}
    out.append(_scatter(x=[place[n][0] for n in nodes], y=[geo.texts[n][1] for n in nodes], mode="text",
                          text=[texts.nodes[n] for n in nodes], customdata=nodes, showlegend=False, hoverinfo="skip",
                          unselected={"textfont": {"color": "#222"}}, textposition=[place[n][1] for n in nodes],
                          textfont={"size": NODE_FONT, "color": "#222"}))
    pad = 3 / scale  # three pixels around the box
    for name, colour, width, picked in (("search match", FOUND, 4, sorted(found)),
                                        ("selected", "#000", 2.5, [selected, *holder])):
        boxes = [geo.boxes[n] for n in picked if n in geo.boxes]
        if boxes:
            xs, ys = _polygons(Box(b.x0 - pad, b.x1 + pad, b.y0 - pad, b.y1 + pad) for b in boxes)
            out.append(_scatter(x=xs, y=ys, mode="lines", name=name, hoverinfo="skip", line={"color": colour, "width": width}))
    return out
