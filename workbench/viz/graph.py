"""The computational graph under the current layouts, as a Plotly figure drawn like Netron.

Data flows top to bottom: ops are boxes coloured by kind, a fused kernel is a dotted box around
its ops, conversion ops are diamonds on their edge, and every edge is labelled with its tensor,
shape and stored layout. The pipeline: ``drawn.display_graph`` (data), ``geometry.graph_geometry``
(pixels; ``fold.fold_geometry`` for a fitted view), ``labels.drawn_texts`` (the texts that have
room), then ``graph_figure`` (traces). Its names stay importable from here.

``changed``, ``selected`` and ``search`` highlight tensors and ops; fused kernels and repeated
blocks can each be drawn as one node; a backward pass's ops are drawn with a dashed outline, or
left out (``backward``, ``show_backward``). ``graph_figure(..., fit=(width, height))`` draws the whole
graph scaled into a chart of that size, folded into side-by-side columns when that shows it
larger, with only the labels that have room (Plotly keeps text at its pixel size whatever the
zoom); hover text keeps everything.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import networkx as nx
import plotly.graph_objects as go

from workbench.viz import blocks
from workbench.viz.drawn import (DIAMONDS, KIND_COLOURS, SYMBOLS, backward_view, collapse_kernels, display_graph,
                                 kernel_title, label_blocks, matching_ops)
from workbench.viz.fold import fold_geometry
from workbench.viz.geometry import (DIAMOND, EDGE_FONT, FONT, MARGIN, NODE_FONT, Box, GraphGeometry, graph_geometry,
                                    text_size)
from workbench.viz.labels import DrawnTexts, drawn_texts

if TYPE_CHECKING:  # engine types, for readers only
    from workbench.engine.ir.graph import Graph
    from workbench.engine.layout.propagate import Plan

__all__ = ["FIT", "KIND_COLOURS", "Box", "GraphGeometry", "chart_width", "collapse_kernels", "display_graph",
           "graph_figure", "graph_geometry", "matching_ops", "text_size"]

HOT = "#ff7f0e"        # edges and labels of tensors that took the new layout
FOUND = "#e6ab02"      # outline of the ops a search matched
KERNEL_LINE = "rgba(31,119,180,0.55)"
KERNEL_FILL = "rgba(31,119,180,0.06)"
BACKWARD = "backward op"  # the legend entry of a backward pass's dashed boxes

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
                 found: Sequence["blocks.Block"] | None = None, fit: tuple[int, int] | None = None,
                 block_names: Mapping[str, str] | None = None, backward: Collection[str] = (),
                 show_backward: bool = True) -> go.Figure:
    """The figure. Node ``customdata`` is the node name (for click selection); every edge label
    is a layout annotation; the edge traces carry ``customdata`` ``"a→b"`` on each point of the
    edge's polyline. ``collapse`` draws each fused kernel, ``collapse_blocks`` each repeated block
    (``blocks.find_blocks``), as one node, except those named in ``expanded``. The view opens on
    the whole graph when it fits ``height`` (default ``VIEW_MAX``) at one pixel per unit, else on
    the part around ``focus`` (default: the first search match, else the selected op). ``found``:
    the blocks ``find_blocks`` gave for this graph, when the caller has them already. ``fit``: a
    chart's (width, height) in pixels: the whole graph scaled down into it (never up), with the
    labels that have room at that scale (see the module docstring). ``block_names``: a collapsed
    block's name to show (``drawn.block_labels``: the module it was written as). ``backward``: the
    ops of a backward pass, drawn dashed (their names in the dashed trace's ``meta``), or left out
    when not ``show_backward`` (``drawn.backward_view``)."""
    g = display_graph(graph, plan)
    if backward:
        g = backward_view(g, backward, show_backward)
        if found is not None:  # found on the whole graph: a block with an op left out is no longer one
            found = [b for b in found if all(op in g for op in b.ops)]
    if collapse_blocks:  # first: blocks are found on the ops, and a collapsed block takes its kernels with it
        g = label_blocks(blocks.collapse_blocks(g, blocks.find_blocks(g) if found is None else found, expanded),
                         block_names or {})
    if collapse:
        g = collapse_kernels(g, expanded)
    geo = graph_geometry(g)
    if fit:  # a deep graph in side-by-side columns: larger in the chart than one thin column
        geo = fold_geometry(geo, *fit)
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
    text = drawn_texts(g, geo, scale, Box(*xrange, *yrange), first=[selected, *holder, *sorted(found)], hot=changed)
    if fit:  # as wide as the drawing and the labels kept (in pixels: MARGIN around them), no wider than asked
        left, right = min(b.x0, text.span[0]) - MARGIN / scale, max(b.x1, text.span[1]) + MARGIN / scale
        xrange = (max(xrange[0], left), min(xrange[1], right))
    traces = (_kernel_fills(geo) + _node_boxes(g, geo) + _edge_traces(g, geo, changed, scale)
              + _node_marks(g, geo, selected, holder, found, text, scale))
    notes = [{"x": x, "y": y, "text": kernel_title(k), "showarrow": False, "xanchor": "left", "yanchor": "middle",
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


def _scatter(**trace: Any) -> dict:
    """A scatter trace as a plain dict: ``go.Figure`` validates it once (a ``go.Scatter`` would be
    validated, then copied and validated again, a third of a 150-op figure's build time)."""
    return {"type": "scatter", **trace}


def _found(g: nx.DiGraph, search: str) -> set[str]:
    """The drawn ops (and collapsed kernels holding one) whose name contains ``search``."""
    ops = [n for n, d in g.nodes(data=True) if d["kind"] not in ("output", *DIAMONDS)]
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
    """A filled box per node, one trace per kind (its legend entry), and one per kind of a
    backward pass's nodes, dashed (one legend entry for them all); diamonds are markers."""
    out, dashed = [], []
    for kind, colour in KIND_COLOURS.items():
        for back in (False, True):
            nodes = [n for n, d in g.nodes(data=True) if d["kind"] == kind and kind not in DIAMONDS
                     and d.get("backward", False) == back]
            if not nodes:
                continue
            xs, ys = _polygons(geo.boxes[n] for n in nodes)
            box = _scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=_tint(colour, 0.18), name=kind,
                           legendgroup=kind, line={"color": colour, "width": 1.5}, hoverinfo="skip")
            if back:
                box |= {"name": BACKWARD, "legendgroup": BACKWARD, "showlegend": False, "meta": nodes,
                        "fillcolor": _tint(colour, 0.07), "line": {"color": colour, "width": 1.5, "dash": "dash"}}
                dashed.append(box)
            else:
                out.append(box)
    if dashed:  # the legend's entry in no kind's colour: the dash is what tells them apart
        dashed.insert(0, _scatter(x=[None], y=[None], mode="lines", name=BACKWARD, legendgroup=BACKWARD, meta=[],
                                  line={"color": "#555", "width": 1.5, "dash": "dash"}, hoverinfo="skip"))
    return out + dashed


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
                texts: DrawnTexts, scale: float = 1.0) -> list[dict]:
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
        diamond = kind in DIAMONDS
        sizes = [max(6.0, scale * (DIAMOND if diamond else min(geo.boxes[n].y1 - geo.boxes[n].y0,
                                                                 geo.boxes[n].x1 - geo.boxes[n].x0))) for n in nodes]
        out.append(_scatter(
            x=[geo.centres[n][0] for n in nodes], y=[geo.centres[n][1] for n in nodes], mode="markers", name=kind,
            legendgroup=kind, showlegend=diamond, customdata=nodes, hovertext=[g.nodes[n]["hover"] for n in nodes],
            hoverinfo="text", unselected=keep, selected=keep,
            marker={"size": sizes, "symbol": SYMBOLS.get(kind, "square"), "color": colour if diamond else "rgba(0,0,0,0)",
                    "line": {"width": 2 if diamond else 0, "color": colour}}))
    nodes = [n for n in g.nodes if n in texts.nodes]
    place = {n: texts.places.get(n) or (geo.texts[n][0], "middle right" if g.nodes[n]["kind"] in DIAMONDS
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
