"""The static SVG drawing of a figure (shown while the browser loads Plotly): it draws what the
Plotly figure draws, where it draws it."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import plotly.graph_objects as go
import pytest

from tests.viz.test_graph import _plan
from workbench.viz.graph import display_graph, graph_figure, graph_geometry
from workbench.viz.preview import figure_svg

NS = {"s": "http://www.w3.org/2000/svg"}


def _svg(fig) -> ET.Element:
    return ET.fromstring(figure_svg(fig))  # well-formed XML, or this raises


def _texts(root: ET.Element) -> list[str]:
    """Each <text>'s lines, joined by '|'."""
    return ["|".join("".join(line.itertext()) for line in t.findall("s:tspan", NS)) for t in root.iter(f"{{{NS['s']}}}text")]


def _points(el: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in el.get("points").split()]


@pytest.mark.parametrize("model", ["r18_stem", "r18_block", "bert_tiny_layer"])
def test_every_node_and_edge_label_of_the_graph_is_drawn(model):
    g, plan = _plan(model)
    fig = graph_figure(g, plan, height=100_000)
    texts = _texts(_svg(fig))
    shown = display_graph(g, plan)
    for n, d in shown.nodes(data=True):
        assert any(t.split("|")[0] == d["label"] for t in texts), (n, d["label"])
    for a in fig.layout.annotations:  # edge labels and kernel titles, line by line
        plain = re.sub(r"<br>", "|", a.text)
        assert plain in texts, plain


def test_boxes_and_edges_sit_where_the_figure_puts_them():
    g, plan = _plan("r18_block")
    fig = graph_figure(g, plan, height=100_000)
    root = _svg(fig)
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    assert float(root.get("width")) == pytest.approx(x1 - x0, abs=1)
    assert float(root.get("height")) == fig.layout.height
    geo = graph_geometry(display_graph(g, plan))
    polygons = [_points(p) for p in root.iter(f"{{{NS['s']}}}polygon")]
    box = geo.boxes["conv1"]  # its outline, in SVG pixels: x from the left of the range, y down from its top
    corners = {(round(box.x0 - x0, 1), round(y1 - box.y0, 1)), (round(box.x1 - x0, 1), round(y1 - box.y1, 1))}
    assert any(corners <= set(p) for p in polygons)
    polylines = [_points(p) for p in root.iter(f"{{{NS['s']}}}polyline")]
    route = geo.routes[("data", "add")]  # the skip connection: its own polyline
    assert [(round(x - x0, 1), round(y1 - y, 1)) for x, y in route] in polylines


def test_markup_becomes_lines_and_bold_and_text_is_escaped():
    fig = go.Figure(go.Scatter(x=[1], y=[1], mode="text", text=["<b>a<1 & b</b><br>c_d<sup>2</sup>"]),
                    layout={"xaxis": {"range": [0, 10]}, "yaxis": {"range": [0, 10]}, "height": 10})
    root = _svg(fig)
    (text,) = root.iter(f"{{{NS['s']}}}text")
    first, second = text.findall("s:tspan", NS)
    assert "".join(first.itertext()) == "a<1 & b" and "".join(second.itertext()) == "c_d2"
    assert all(t.get("font-weight") == "bold" for t in first)
    assert float(text.get("x")) == 1 and float(text.get("y")) == 9  # y counted down from the top of the range


def test_invisible_click_targets_and_hidden_traces_draw_nothing():
    fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], mode="markers", marker={"color": "rgba(0,0,0,0)", "size": 9}),
                     go.Scatter(x=[1, 2], y=[1, 2], mode="lines", visible="legendonly"),
                     go.Scatter(x=[5], y=[5], mode="markers", marker={"symbol": "diamond", "size": 10, "color": "#d62728"})],
                    layout={"xaxis": {"range": [0, 10]}, "yaxis": {"range": [0, 10]}, "height": 10})
    root = _svg(fig)
    shapes = [el for el in root if el.tag != f"{{{NS['s']}}}text"]
    assert len(shapes) == 1  # the diamond alone
    assert sorted(_points(shapes[0])) == [(0.0, 5.0), (5.0, 0.0), (5.0, 10.0), (10.0, 5.0)]
    assert shapes[0].get("fill") == "#d62728"
