"""The labels a scaled-down (fitted) graph has room for: Plotly keeps text at its pixel size
whatever the zoom, so a drawing shown at a fraction of its size keeps only the texts that do not
overlap, chosen greedily (the selected op and the search matches first, then the heavy ops).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

import networkx as nx

from workbench.viz.drawn import DIAMONDS, edge_text, kernel_title, node_text
from workbench.viz.geometry import EDGE_FONT, NODE_FONT, Box, GraphGeometry, text_size

__all__ = ["DrawnTexts", "drawn_texts"]

#: the order in which op names claim room in a fitted view: collapsed groups and the heavy ops first
_NAME_RANK = {"block": 0, "kernel": 0, "complex": 0, "input": 1, "output": 1, "opaque": 1, "other": 2,
              "elementwise": 2, "conversion": 3, "fused conversion": 3}
LABEL_GAP = 2  # pixels kept clear around each label of a fitted view
BESIDE = 3  # pixels between a box and its name moved beside it
_CELL = 64  # pixels: the side of a bucket of ``_Room``


class DrawnTexts(NamedTuple):
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


def drawn_texts(g: nx.DiGraph, geo: GraphGeometry, scale: float, view: Box, first: Sequence[str | None],
                 hot: Collection[str]) -> DrawnTexts:
    """Every label in full at one pixel per unit (the geometry gave each its room). Scaled down,
    greedily, each in a box clear of those kept before it and inside ``view``: the op names (the
    nodes in ``first``, then by ``_NAME_RANK``; on its box, else beside it, left or right: a
    column of ops has room on its sides), the edges' tensors and shapes (those in ``hot`` first),
    kernel titles, then the edges' layouts and the ops' operators as a second line. A short
    text's box lies inside its long one's (same anchor), so a text grows in place."""
    full = DrawnTexts({n: node_text(d) for n, d in g.nodes(data=True)}, {e: edge_text(d) for e, d in g.edges.items()},
                  set(geo.titles), {})  # the geometry's bounds take them in
    if scale >= 1:
        return full
    room = _Room(Box(view.x0 * scale, view.x1 * scale, view.y0 * scale, view.y1 * scale))
    for n, b in geo.boxes.items():  # a name beside its box, or an edge's label, stays off other ops' boxes
        room.occupy(n, Box(b.x0 * scale, b.x1 * scale, b.y0 * scale, b.y1 * scale))
    rank = {n: i for i, n in enumerate(n for n in first if n in g)}
    order = sorted(g.nodes, key=lambda n: (rank.get(n, len(rank)), _NAME_RANK.get(g.nodes[n]["kind"], 2)))
    out = DrawnTexts({}, {}, set(), {})

    def places(n: str, text: str) -> list[tuple[float, str]]:
        """Where a node's text may go: on its box when it fits there, else beside it (left first: edge
        labels start right of their edge), else on it all the same; a diamond's is beside it."""
        if g.nodes[n]["kind"] in DIAMONDS:
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
        if room.take(("title", k), _text_box(x * scale, y * scale, kernel_title(k), EDGE_FONT, "middle right")):
            out.titles.add(k)
    for e in [e for e in edges if e in out.edges]:
        if room.take(e, edge_box(e, full.edges[e])):
            out.edges[e] = full.edges[e]
    for n in [n for n in order if n in out.nodes and full.nodes[n] != out.nodes[n]]:
        if room.take(n, node_box(n, full.nodes[n], out.places[n])):
            out.nodes[n] = full.nodes[n]
    return out._replace(span=(room.left / scale, room.right / scale))

