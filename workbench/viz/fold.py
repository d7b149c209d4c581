"""A tall drawing folded into side-by-side columns, so that a fitted view shows it larger.

A fitted graph is scaled until its height fits the chart: a deep network (a chain of blocks)
came out as a column a few dozen pixels wide, the rest of the chart empty. ``fold_geometry``
cuts the drawing in gaps between rows (never inside a fused kernel's outline) into bands of
about equal height and sets them side by side, left to right. An edge that crosses a cut ends
at the bottom of one column and goes on at the top of the next, at the same x in its column;
its route holds a ``(None, None)`` point where it jumps (Plotly breaks a line there).
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.viz.geometry import MARGIN, Box, GraphGeometry

__all__ = ["COLUMN_GAP", "MAX_COLUMNS", "fold_geometry", "folded"]

COLUMN_GAP = 40  # pixels between two columns, at full size
MAX_COLUMNS = 8
#: a fold must show the drawing this much larger than one column fewer to be worth its jumps
GAIN = 1.1


def _cuts(geo: GraphGeometry, columns: int) -> list[float]:
    """The y of each cut, top down: the middle of the gap nearest to each equal share of the height."""
    b, mids = geo.bounds, [(top + bottom) / 2 for top, bottom in geo.gaps]
    cuts: list[float] = []
    for i in range(1, columns):
        target = b.y1 - (b.y1 - b.y0) * i / columns
        below = [m for m in mids if m < (cuts[-1] if cuts else b.y1)]
        if not below:
            break
        cuts.append(min(below, key=lambda m: abs(m - target)))
    return cuts


def folded(geo: GraphGeometry, cuts: Sequence[float]) -> GraphGeometry:
    """``geo`` cut at each y of ``cuts`` (top down, in its gaps) and its bands set side by side."""
    if not cuts:
        return geo
    b = geo.bounds
    tops, bottoms = [b.y1, *cuts], [*cuts, b.y0]
    step = b.x1 - b.x0 + COLUMN_GAP

    def band(y: float) -> int:
        return sum(y < c for c in cuts)

    def move(p: tuple[float, float], i: int) -> tuple[float, float]:
        return p[0] + i * step, p[1] + b.y1 - tops[i]

    def box(r: Box) -> Box:
        i = band((r.y0 + r.y1) / 2)
        (x0, y0), (x1, y1) = move((r.x0, r.y0), i), move((r.x1, r.y1), i)
        return Box(x0, x1, y0, y1)

    def route(pts: list) -> list:
        out = [move(pts[0], band(pts[0][1]))]
        for (xa, ya), (xb, yb) in zip(pts, pts[1:]):
            for c in [c for c in cuts if yb < c <= ya]:  # downwards across a cut: jump to the next column
                xc = xa + (xb - xa) * (ya - c) / (ya - yb)
                out += [move((xc, c), band(c + 1e-9)), (None, None), move((xc, c), band(c - 1e-9))]
            out.append(move((xb, yb), band(yb)))
        return out

    def outline(pts: list) -> list:
        i = band((min(y for _, y in pts) + max(y for _, y in pts)) / 2)
        return [move(p, i) for p in pts]

    height = max(t - bt for t, bt in zip(tops, bottoms))
    return GraphGeometry(
        centres={n: move(p, band(p[1])) for n, p in geo.centres.items()},
        boxes={n: box(r) for n, r in geo.boxes.items()},
        texts={n: move(p, band(geo.centres[n][1])) for n, p in geo.texts.items()},
        routes={e: route(pts) for e, pts in geo.routes.items()},
        labels={e: move(p, band(p[1])) for e, p in geo.labels.items()},
        kernels={k: outline(pts) for k, pts in geo.kernels.items()},
        titles={k: move(p, band(p[1])) for k, p in geo.titles.items()},
        bounds=Box(b.x0, b.x0 + len(tops) * step - COLUMN_GAP, b.y1 - height, b.y1), gaps=())


def _scale(b: Box, width: int, height: int) -> float:
    return min(1.0, (width - 2 * MARGIN) / max(b.x1 - b.x0, 1), (height - 2 * MARGIN) / max(b.y1 - b.y0, 1))


def fold_geometry(geo: GraphGeometry, width: int, height: int) -> GraphGeometry:
    """``geo`` in the number of columns (up to ``MAX_COLUMNS``) that shows it largest in a chart
    ``width`` x ``height`` pixels, counting ``MARGIN`` around it; one column (``geo`` itself)
    unless more are ``GAIN`` times larger than one fewer."""
    best, best_scale = geo, _scale(geo.bounds, width, height)
    for columns in range(2, MAX_COLUMNS + 1):
        if best_scale >= 1:
            break
        cand = folded(geo, _cuts(geo, columns))
        if (s := _scale(cand.bounds, width, height)) >= best_scale * GAIN:
            best, best_scale = cand, s
    return best
