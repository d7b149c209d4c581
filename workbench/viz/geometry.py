"""Where the drawn graph goes, in pixels: igraph's Sugiyama layout of ``drawn.display_graph``'s
DAG, turned into boxes, edge routes, label anchors and kernel outlines.

Data flows top to bottom. igraph places the vertices on a unit grid (edge labels are vertices of
their own, as in Graphviz); this module turns its grid into pixels, one data unit a screen pixel,
so that text sized in pixels can be laid out in data units (``text_size``).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import igraph
import networkx as nx

from workbench.viz.drawn import DIAMONDS, edge_text, kernel_title, node_text

__all__ = ["FONT", "NODE_FONT", "EDGE_FONT", "LINE_EM", "MARGIN", "DIAMOND", "Box", "GraphGeometry", "graph_geometry",
           "text_size"]

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
    #: the gaps between two rows, (top, bottom) from the top down: where only edges pass
    gaps: tuple[tuple[float, float], ...] = ()


class _Ext(NamedTuple):
    """A vertex's extent from its centre."""

    left: float
    right: float
    top: float
    bottom: float


def _node_ext(d: dict) -> _Ext:
    w, h = text_size(node_text(d), NODE_FONT)
    if d["kind"] in DIAMONDS:
        half = max(DIAMOND, h) / 2
        return _Ext(DIAMOND / 2, DIAMOND / 2 + 4 + w, half, half)
    return _Ext(w / 2 + BOX_PAD_X, w / 2 + BOX_PAD_X, h / 2 + BOX_PAD_Y, h / 2 + BOX_PAD_Y)


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
        w, h = text_size(edge_text(g.edges[e]), EDGE_FONT)
        ext[e] = _Ext(LANE, LABEL_DX + w + 2 * LABEL_PAD, h / 2 + LABEL_PAD, h / 2 + LABEL_PAD)
    members = _kernel_members(g)
    top_of = {k: min(vs, key=lambda v: (grid.rows[v], grid.x[v])) for k, vs in members.items()}
    for k, top in top_of.items():  # room for the kernel's title right of its first box
        e, tw = ext[top], text_size(kernel_title(k), EDGE_FONT)[0]
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
        if d["kind"] in DIAMONDS:
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
    inside = [(min(y for _, y in o), max(y for _, y in o)) for o in kernels.values()]
    gaps = [(row_y[r] - row_bottom[r], row_y[r + 1] + row_top[r + 1]) for r in range(max(row_y))]
    gaps = [(t, b) for t, b in gaps if not any(lo < (t + b) / 2 < hi for lo, hi in inside)]
    return GraphGeometry(centres={n: centres[n] for n in g.nodes}, boxes=boxes, texts=texts, routes=routes,
                         labels=labels, kernels=kernels, titles=titles, bounds=bounds, gaps=tuple(gaps))


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
            step = 0.0 if g.nodes[n]["kind"] in DIAMONDS else min(PORT_STEP, (b.x1 - b.x0 - 16) / max(len(es), 1))
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

