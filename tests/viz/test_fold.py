"""A deep graph folded into side-by-side columns: what a fitted view draws instead of one thin
column, every edge continuing at the top of the next column where it left the last one."""

from __future__ import annotations

import pytest

from tests.viz.test_graph import _fit_scale, residual_chain
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.propagate import plan_layouts
from workbench.viz.fold import COLUMN_GAP, fold_geometry, folded
from workbench.viz.geometry import MARGIN, graph_geometry
from workbench.viz.graph import FIT, chart_width, display_graph, graph_figure


@pytest.fixture(scope="module")
def chain():
    g = residual_chain(150)
    return g, plan_layouts(g, LayoutBook())


@pytest.fixture(scope="module")
def geo(chain):
    return graph_geometry(display_graph(*chain))


def test_the_fitted_view_of_a_deep_graph_fills_the_charts_width(chain, geo):
    """One column would be scaled to the chart's height (a thin strip); folded, the drawing
    takes most of the chart's width, several times larger."""
    fig = graph_figure(*chain, fit=FIT)
    one_column = (FIT[1] - 2 * MARGIN) / (geo.bounds.y1 - geo.bounds.y0)
    assert _fit_scale(fig) > 3 * one_column
    assert 0.9 * FIT[0] <= chart_width(fig) <= FIT[0]


def test_a_fold_cuts_between_rows_and_sets_the_bands_side_by_side(geo):
    cuts = [(t + b) / 2 for t, b in (geo.gaps[len(geo.gaps) // 3], geo.gaps[2 * len(geo.gaps) // 3])]
    out = folded(geo, cuts)
    b, step = geo.bounds, geo.bounds.x1 - geo.bounds.x0 + COLUMN_GAP
    assert out.bounds.x1 - out.bounds.x0 == pytest.approx(3 * step - COLUMN_GAP)
    assert out.bounds.y1 == b.y1 and out.bounds.y1 - out.bounds.y0 < (b.y1 - b.y0) / 2
    for n, (x, y) in geo.centres.items():  # each node moved whole into the column of its band
        column = sum(y < c for c in cuts)
        top = [b.y1, *cuts][column]
        assert out.centres[n] == pytest.approx((x + column * step, y + b.y1 - top))
        assert out.boxes[n].x1 - out.boxes[n].x0 == pytest.approx(geo.boxes[n].x1 - geo.boxes[n].x0)
    jumps = 0
    for e, pts in out.routes.items():
        assert pts[0][1] == pytest.approx(out.boxes[e[0]].y0)  # still leaves its source's bottom...
        assert pts[-1][1] == pytest.approx(out.boxes[e[1]].y1)  # ...and ends on its target's top
        for i, p in enumerate(pts):
            if p == (None, None):  # leaves one column at its bottom, enters the next at its top, same x
                (xa, ya), (xb, yb) = pts[i - 1], pts[i + 1]
                assert xb - xa == pytest.approx(step) and yb == pytest.approx(b.y1)
                assert any(ya == pytest.approx(c + b.y1 - top) for c, top in zip(cuts, [b.y1, *cuts]))  # at a cut
                jumps += 1
    assert jumps >= 2  # the skip connections and the chain cross both cuts


def test_no_fold_for_a_graph_that_fits_or_one_with_nowhere_to_cut(geo):
    assert fold_geometry(geo, 100_000, 100_000) is geo
    assert folded(geo, []) is geo
    assert fold_geometry(geo._replace(gaps=()), *FIT).bounds == geo.bounds
