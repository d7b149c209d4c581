"""The graph figure (``viz.graph``): every op and tensor drawn, conversions on their edges,
layouts in the labels, skip connections on their own routes, labels that neither overlap nor
get clipped, edges around the boxes, large networks readable, fitted to the chart, and collapsed
kernels and blocks."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions, apply_layout
from workbench.engine.layout.presets import preset_actions
from workbench.engine.layout.propagate import plan_layouts
from workbench.engine.models import zoo
from workbench.viz.blocks import find_blocks
from workbench.viz.graph import FIT, chart_width, collapse_kernels, display_graph, graph_figure


def _labels(fig) -> list[str]:
    return [a.text for a in fig.layout.annotations if a.text]


def _plan(model: str, preset: tuple[str, str] | None = None):
    g = zoo.load(model)
    book = apply_actions(g, LayoutBook(), preset_actions(g, *preset)) if preset else LayoutBook()
    return g, plan_layouts(g, book)


def residual_chain(ops: int = 150):
    """A ``ops``-op network of residual blocks (conv, relu, conv, add of the block input, relu)."""
    b = GraphBuilder(f"chain{ops}")
    x = b.input("data", (1, 8, 8, 8))
    i = 0
    while len(b.nodes) + 5 <= ops:
        y = b.op(f"c{i}a", "conv2d", x, b.const(f"c{i}a.weight", (8, 8, 3, 3), "OIHW"), padding=1)
        y = b.op(f"c{i}b", "conv2d", b.op(f"r{i}a", "relu", y), b.const(f"c{i}b.weight", (8, 8, 3, 3), "OIHW"), padding=1)
        x = b.op(f"r{i}b", "relu", b.op(f"add{i}", "add", y, x))
        i += 1
    while len(b.nodes) < ops:
        x = b.op(f"tail{len(b.nodes)}", "relu", x)
    return b.build()


def _routes(fig) -> dict[str, list[tuple[float, float]]]:
    """Each drawn edge's polyline, read from the edge traces (``customdata`` "a→b" per point)."""
    out = defaultdict(list)
    for tr in fig.data:
        if tr.mode == "lines" and tr.customdata is not None:
            for x, y, e in zip(tr.x, tr.y, tr.customdata):
                if e is not None:
                    out[e].append((x, y))
    return dict(out)


#: the test's own text estimate (px per character and per line, in font sizes); the figure's is more generous
EM, BOLD, LINE = 0.58, 0.64, 1.2


def _extent(text: str, size: float) -> tuple[float, float]:
    lines = text.split("<br>")
    width = max(len(re.sub(r"<[^>]+>", "", ln)) * (BOLD if "<b>" in ln else EM) for ln in lines) * size
    return width, len(lines) * LINE * size


def _text_boxes(fig) -> dict[str, tuple[float, float, float, float]]:
    """(x0, x1, y0, y1) of every drawn text: node texts (centred, or starting right of a diamond)
    and annotations (edge labels and kernel titles, anchored left-middle)."""
    boxes = {}
    for tr in fig.data:
        if tr.mode == "text":
            for x, y, t, pos, name in zip(tr.x, tr.y, tr.text, tr.textposition, tr.customdata):
                w, h = _extent(t, tr.textfont.size)
                x0 = x if pos == "middle right" else x - w / 2
                boxes[f"node {name}"] = (x0, x0 + w, y - h / 2, y + h / 2)
    for i, a in enumerate(fig.layout.annotations):
        assert a.xanchor == "left" and a.yanchor == "middle"
        w, h = _extent(a.text, a.font.size)
        boxes[f"label {i} {a.text}"] = (a.x, a.x + w, a.y - h / 2, a.y + h / 2)
    return boxes


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _crosses(seg, box) -> bool:
    """Whether segment ``seg`` passes through the inside of ``box`` (sampled every pixel)."""
    (x0, y0), (x1, y1) = seg
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    return any(box[0] < x0 + (x1 - x0) * k / n < box[1] and box[2] < y0 + (y1 - y0) * k / n < box[3]
               for k in range(n + 1))


def _collinear_overlap(s, t, tol: float = 3.0) -> bool:
    """Whether two segments lie on one line (within ``tol`` px) and share more than ``tol`` px of it."""
    (ax, ay), (bx, by) = s
    length = ((bx - ax) ** 2 + (by - ay) ** 2) ** 0.5
    if length < tol:
        return False
    ux, uy = (bx - ax) / length, (by - ay) / length
    offs = [(-uy * (px - ax) + ux * (py - ay)) for px, py in t]  # distances of t's ends from s's line
    if any(abs(o) > tol for o in offs):
        return False
    proj = sorted(ux * (px - ax) + uy * (py - ay) for px, py in t)
    return min(length, proj[1]) - max(0.0, proj[0]) > tol


def _segments(path):
    return list(zip(path, path[1:]))


#: each model's skip connections (graph input or block output -> the add that closes the block)
SKIPS = {"r18_block": ["data→add"], "mv2_block": ["data→add"], "bert_tiny_layer": ["data→add1", "ln1→add2"]}


CASES = [("r18_block", None), ("r18_block", ("alt_tiled", "conv2")), ("mv2_block", None),
         ("mv2_block", ("alt_tiled", "project")), ("bert_tiny_layer", None), ("bert_tiny_layer", ("nkn", "out"))]


@pytest.mark.parametrize("model", sorted(zoo.MODELS))
def test_every_op_and_non_constant_tensor_is_drawn(model):
    g = zoo.load(model)
    plan = plan_layouts(g, LayoutBook())
    d = display_graph(g, plan)
    assert {n.name for n in g.nodes} <= set(d.nodes)
    drawn = {e["tensor"] for _, _, e in d.edges(data=True)}
    assert drawn == {t for t, ten in g.tensors.items() if ten.role != "const"}
    fig = graph_figure(g, plan)
    names = {n for tr in fig.data if tr.mode == "markers" and tr.customdata is not None for n in tr.customdata}
    assert {n.name for n in g.nodes} <= names
    assert set(_routes(fig)) == {f"{a}→{b}" for a, b in d.edges()}


def test_a_conversion_between_two_convs_is_a_node_on_that_edge():
    g = zoo.load("r18_block")
    book = apply_layout(g, LayoutBook(), "relu1", "split", {"dim": 1, "factors": [4, 16]})
    book = apply_layout(g, book, "relu1@conv2", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    d = display_graph(g, plan)
    convs = [n for n, a in d.nodes(data=True) if a["kind"] in ("conversion", "fused conversion")]
    assert len(convs) == len(plan.conversions) >= 1
    into_conv2 = [a for a, b in d.in_edges("conv2")]
    # relu1 (a simple op) writes conv2's layout itself: the conversion is drawn as a fused one
    assert [d.nodes[a]["kind"] for a in into_conv2 if "convert" in a] == ["fused conversion"]
    fig = graph_figure(g, plan)
    fused = next(tr for tr in fig.data if tr.name == "fused conversion" and tr.mode == "markers")
    assert fused.marker.symbol == "diamond-open" and list(fused.customdata) == [a for a in into_conv2 if "convert" in a]
    # ... inside the outline of relu1's kernel (conv1): between its left and right edges at its height
    kernels = next(tr for tr in fig.data if tr.name == "fused kernel")
    outline = [(x, y) for x, y in zip(kernels.x, kernels.y)]
    first = outline[:outline.index((None, None))]
    x, y = fused.x[0], fused.y[0]
    assert min(py for _, py in first) < y < max(py for _, py in first)
    assert min(px for px, py in first) < x < max(px for px, py in first)
    edge_hover = [h for tr in fig.data if tr.hovertext is not None and tr.customdata is None for h in tr.hovertext]
    assert any("relu1" in h and "C.o" in h for h in edge_hover)  # the stored layout and shape on hover
    assert any("relu1" in lab and "C.o" in lab for lab in _labels(fig))  # ... and drawn on the edge


def test_changed_tensors_are_highlighted_and_labels_show_layouts():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "channels_last", "conv"))
    plan = plan_layouts(g, book)
    fig = graph_figure(g, plan, changed={"conv", "bias", "relu"}, selected="conv")
    hot = next(tr for tr in fig.data if tr.name == "took the new layout" and tr.mode == "lines")
    # conv->bias, bias->relu, relu->its conversion back to NCHW, conversion->output
    assert len({e for e in hot.customdata if e}) == 4
    assert any("[N H W C]" in lab for lab in _labels(fig))
    selected = next(tr for tr in fig.data if tr.name == "selected")
    conv = next(tr for tr in fig.data if tr.name == "complex" and tr.mode == "markers")
    assert min(selected.x[:4]) < conv.x[0] < max(selected.x[:4])  # the selected conv is outlined
    assert min(selected.y[:4]) < conv.y[0] < max(selected.y[:4])


@pytest.mark.parametrize("model, skip", [(m, e) for m, es in SKIPS.items() for e in es])
def test_a_skip_connection_is_drawn_on_its_own_route(model, skip):
    """Not over the main chain: no segment of the skip edge lies on another edge's segment, and
    it passes through no op's box on the way (the old drawing ran it through the whole chain)."""
    fig = graph_figure(*_plan(model))
    routes = _routes(fig)
    path = routes[skip]
    others = [seg for e, p in routes.items() if e != skip for seg in _segments(p)]
    assert not [(s, t) for s in _segments(path) for t in others if _collinear_overlap(s, t)]
    ends = set(skip.split("→"))
    boxes = {k: b for k, b in _text_boxes(fig).items() if k.startswith("node ") and k[5:] not in ends}
    assert not [(k, s) for s in _segments(path) for k, b in boxes.items() if _crosses(s, b)]
    # and it is not drawn as one straight line from its source to its target
    assert len(path) > 2 and len({x for x, _ in path}) > 1


@pytest.mark.parametrize("model, preset", CASES)
def test_labels_neither_overlap_nor_get_clipped(model, preset):
    """Every text (op names, edge labels with layouts, kernel titles) has room of its own, also
    after tiling makes layout labels long, and the axes show all of it when the height allows."""
    g, plan = _plan(model, preset)
    fig = graph_figure(g, plan, height=100_000)
    boxes = list(_text_boxes(fig).items())
    assert len(boxes) > len(g.nodes)
    assert not [(a, b) for i, (a, ra) in enumerate(boxes) for b, rb in boxes[i + 1:] if _overlap(ra, rb)]
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    assert not [k for k, b in boxes if b[0] < x0 or b[1] > x1 or b[2] < y0 or b[3] > y1]
    assert fig.layout.yaxis.scaleanchor == "x"  # one unit is one pixel, so the estimate in pixels holds


@pytest.mark.parametrize("model, preset", CASES)
def test_edges_avoid_the_boxes_they_do_not_connect(model, preset):
    fig = graph_figure(*_plan(model, preset))
    texts = {k[5:]: b for k, b in _text_boxes(fig).items() if k.startswith("node ")}
    hits = [(e, n) for e, path in _routes(fig).items() for n, b in texts.items()
            if n not in e.split("→") and any(_crosses(s, b) for s in _segments(path))]
    assert not hits


def test_a_150_op_network_is_readable():
    g = residual_chain(150)
    plan = plan_layouts(g, LayoutBook())
    fig = graph_figure(g, plan, search="add20")
    routes = _routes(fig)
    skips = [e for e in routes if e.split("→")[1].startswith("add") and not e.startswith("c")]
    assert len(skips) == 30  # every block's input reaches its add on a route of its own
    for skip in skips:
        others = [seg for e, p in routes.items() if e != skip for seg in _segments(p)]
        assert not [t for s in _segments(routes[skip]) for t in others if _collinear_overlap(s, t)], skip
    boxes = list(_text_boxes(fig).items())
    assert not [(a, b) for i, (a, ra) in enumerate(boxes) for b, rb in boxes[i + 1:i + 40] if _overlap(ra, rb)]
    # too tall for one screen: the view opens on the search match, which is outlined
    assert fig.layout.height <= 1100
    match = next(tr for tr in fig.data if tr.name == "search match")
    (y0, y1), ys = fig.layout.yaxis.range, [y for y in match.y if y is not None]
    assert y0 < min(ys) < max(ys) < y1
    assert len([y for y in match.y if y is None]) == 1  # add20 only, not add2


def test_collapsed_kernels_are_one_node_each_and_expand_on_demand():
    g, plan = _plan("r18_block")
    d = display_graph(g, plan)
    c = collapse_kernels(d)
    assert set(c.nodes) == {"data", "kernel conv1", "kernel conv2", "output relu2"}
    assert c.nodes["kernel conv2"]["sub"] == "C2D + bias_add + add + relu"
    assert set(c.edges) == {("data", "kernel conv1"), ("kernel conv1", "kernel conv2"), ("data", "kernel conv2"),
                            ("kernel conv2", "output relu2")}
    assert "conv2_bias" in collapse_kernels(d, keep={"conv2"})
    fig = graph_figure(g, plan, collapse=True, expanded={"conv1"}, search="conv")
    names = {n for tr in fig.data if tr.mode == "markers" and tr.customdata is not None for n in tr.customdata}
    assert {"conv1", "relu1", "kernel conv2"} <= names and "conv2" not in names
    match = next(tr for tr in fig.data if tr.name == "search match")
    assert len([y for y in match.y if y is None]) == 3  # conv1, conv1_bias and the kernel holding conv2


def test_an_empty_graph_is_an_empty_figure():
    g = GraphBuilder("empty").build()
    assert graph_figure(g, plan_layouts(g, LayoutBook())).data == ()


def _fit_scale(fig) -> float:
    """Pixels per unit of a fitted figure: its plot's height over its y range (the axes are 1:1)."""
    (y0, y1), m = fig.layout.yaxis.range, fig.layout.margin
    return (fig.layout.height - m.t - m.b) / (y1 - y0)


def _drawn_points(fig) -> list[tuple[float, float]]:
    """Every point of the drawing's lines: node boxes, edges, kernel outlines."""
    return [(x, y) for tr in fig.data if tr.mode == "lines" for x, y in zip(tr.x, tr.y) if x is not None]


#: big graphs, fitted: a network expanded and with its blocks collapsed, bert with long tiled labels
FITS = [("mobilenet_v2", None, False), ("mobilenet_v2", None, True), ("resnet18", None, False),
        ("bert_tiny_layer", None, False), ("bert_tiny_layer", ("nkn", "out"), False)]


@pytest.mark.parametrize("model, preset, fold", FITS)
def test_a_fitted_graph_is_all_in_view_and_no_two_labels_overlap(model, preset, fold):
    """Text keeps its pixel size when the drawing is scaled down: the fitted figure keeps the
    labels that have room, none overlapping another at the figure's scale (pixel boxes from the
    test's own text estimate), inside the chart; the whole graph is in the axes' ranges, in a
    chart no wider than asked for; the hover text keeps every op and every edge label."""
    g, plan = _plan(model, preset)
    fig = graph_figure(g, plan, collapse_blocks=fold, selected="add5" if model == "mobilenet_v2" else None, fit=FIT)
    scale = _fit_scale(fig)
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    assert scale < 1 and chart_width(fig) == max(round((x1 - x0) * scale), 320) <= FIT[0]
    assert fig.layout.height - fig.layout.margin.t <= FIT[1]  # the plot; the legend's rows above it
    points = _drawn_points(fig)
    assert all(x0 < x < x1 and y0 < y < y1 for x, y in points)
    boxes = []
    for tr in fig.data:
        if tr.mode == "text":
            for x, y, t, pos in zip(tr.x, tr.y, tr.text, tr.textposition):
                w, h = _extent(t, tr.textfont.size)
                left = x * scale - {"middle right": 0, "middle left": w}.get(pos, w / 2)  # beside a box, or on it
                boxes.append((t, (left, left + w, y * scale - h / 2, y * scale + h / 2)))
    for a in fig.layout.annotations:
        w, h = _extent(a.text, a.font.size)
        boxes.append((a.text, (a.x * scale, a.x * scale + w, a.y * scale - h / 2, a.y * scale + h / 2)))
    assert not [(a, b) for i, (a, ra) in enumerate(boxes) for b, rb in boxes[i + 1:] if _overlap(ra, rb)]
    assert not [t for t, b in boxes if b[0] < x0 * scale or b[1] > x1 * scale or b[2] < y0 * scale or b[3] > y1 * scale]
    names = {n for tr in fig.data if tr.mode == "text" for n in tr.customdata}
    assert len(names) >= 10  # op names first, then edge labels where there is room (bert's, at half size)
    assert model != "bert_tiny_layer" or len(fig.layout.annotations) >= 10
    routes = _routes(fig)
    hovered = {n for tr in fig.data if tr.mode == "markers" and tr.customdata is not None for n in tr.customdata}
    tips = [h for tr in fig.data if tr.hovertext is not None and tr.customdata is None for h in tr.hovertext]
    assert {n for e in routes for n in e.split("→")} <= hovered and len(tips) == len(routes)
    assert fold or {n.name for n in g.nodes} <= hovered
    if model == "mobilenet_v2":  # the selected op's name (or its block's) claims its room first
        d = display_graph(g, plan)
        assert (next(b.name for b in find_blocks(d) if "add5" in b.ops) if fold else "add5") in names


@pytest.mark.parametrize("model", ["bert_tiny_layer", "mobilenet_v2"])
def test_a_fitted_graphs_labels_stay_off_other_ops_boxes(model):
    """At fit, an op's name sits on its own box or beside it, and an edge's label beside its edge:
    no label covers another op's box (bert's k_bias once sat on q_bias's box)."""
    g, plan = _plan(model)
    fig = graph_figure(g, plan, fit=FIT)
    scale = _fit_scale(fig)
    rects = []  # the ops' boxes: the kinds' filled outlines, one closed polygon each
    for tr in fig.data:
        if tr.fill == "toself" and tr.name != "fused kernel":
            xs, ys = list(tr.x), list(tr.y)
            for i in range(0, len(xs), 6):
                rects.append((min(xs[i:i + 5]) * scale, max(xs[i:i + 5]) * scale,
                              min(ys[i:i + 5]) * scale, max(ys[i:i + 5]) * scale))
    assert len(rects) > 20
    covered = []
    for tr in fig.data:
        if tr.mode == "text":
            for x, y, t, pos in zip(tr.x, tr.y, tr.text, tr.textposition):
                w, h = _extent(t, tr.textfont.size)
                left = x * scale - {"middle right": 0, "middle left": w}.get(pos, w / 2)
                box = (left + 1, left + w - 1, y * scale - h / 2 + 1, y * scale + h / 2 - 1)
                own = [r for r in rects if r[0] <= x * scale <= r[1] and r[2] <= y * scale <= r[3]]
                covered += [(t, r) for r in rects if _overlap(box, r) and (pos != "middle center" or r not in own)]
    for a in fig.layout.annotations:
        w, h = _extent(a.text, a.font.size)
        box = (a.x * scale + 1, a.x * scale + w - 1, a.y * scale - h / 2 + 1, a.y * scale + h / 2 - 1)
        covered += [(a.text, r) for r in rects if _overlap(box, r)]
    assert not covered, covered[:5]


def test_a_graph_that_fits_at_full_size_is_fitted_with_every_label():
    g, plan = _plan("r18_block")
    full, fitted = graph_figure(g, plan, height=100_000), graph_figure(g, plan, fit=FIT)
    assert _fit_scale(fitted) == pytest.approx(1, abs=0.01)
    assert _labels(fitted) == _labels(full)
    assert [tr.text for tr in fitted.data if tr.mode == "text"] == [tr.text for tr in full.data if tr.mode == "text"]


def test_a_150_op_network_is_fitted_with_every_point_in_view_and_its_match_named():
    g = residual_chain(150)
    plan = plan_layouts(g, LayoutBook())
    fig = graph_figure(g, plan, fit=FIT, search="add20")
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    assert all(x0 < x < x1 and y0 < y < y1 for x, y in _drawn_points(fig))
    texts = next(tr.text for tr in fig.data if tr.mode == "text")
    assert any(t.split("<br>")[0] == "<b>add20</b>" for t in texts)  # the match shows its name


@pytest.mark.slow
def test_collapsed_blocks_are_named_by_their_module():
    """MobileNet-V2's repeated inverted residuals collapse into nodes named after the module each
    was written as (``features.5``), the structure and occurrence kept in the hover."""
    from workbench.engine.session.graph_panel import op_modules
    from workbench.viz.drawn import block_labels

    g, plan = _plan("mobilenet_v2")
    found = find_blocks(display_graph(g, plan))
    names = block_labels(found, op_modules(g, {"zoo": "mobilenet_v2"}))
    assert set(names) == {b.name for b in found}
    assert sorted(names.values(), key=lambda s: int(s.split(".")[1])) == [f"features.{i}" for i in range(5, 19)]
    fig = graph_figure(g, plan, collapse_blocks=True, found=found, block_names=names)
    marks = next(tr for tr in fig.data if tr.mode == "markers" and tr.name == "block")
    texts = {n: t for tr in fig.data if tr.mode == "text" for n, t in zip(tr.customdata, tr.text)}
    for block, hover in zip(marks.customdata, marks.hovertext):
        assert texts[block].startswith(f"<b>{names[block]}</b>") and f"({block})" in hover
