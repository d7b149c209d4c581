"""A static SVG drawing of a Plotly figure: the page shows it while the browser loads Plotly.

Streamlit's Plotly chart is a large chunk that the browser fetches only when a chart arrives
and evaluates for a second or more: a new tab would show the graph page without its graph for
that long. ``figure_svg`` draws the same figure (the Graph page's, which maps one
axis unit to one pixel) as plain SVG, so it shows at once; the page hides it when the chart is
drawn. It draws what ``graph.graph_figure`` uses, nothing more: scatter traces (lines, filled
outlines, markers, text), and annotations; no legend, hover or axes.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

import plotly.graph_objects as go

__all__ = ["figure_svg"]

LINE_EM = 1.25      # Plotly's line height in em, for multi-line text
#: Plotly's text markup: line breaks, bold, italic, other tags (dropped), text; a '<' opening no tag is text
_TOKEN = re.compile(r"<br\s*/?>|</?[bi]>|</?[a-z][^<>]*>|[^<]+|<", re.IGNORECASE)
#: marker symbols as unit outlines around the centre (y down), scaled by half the marker size
_OUTLINES = {"square": [(-1, -1), (1, -1), (1, 1), (-1, 1)], "diamond": [(0, -1), (1, 0), (0, 1), (-1, 0)],
             "triangle-down": [(-1, -0.6), (1, -0.6), (0, 1)], "triangle-up": [(-1, 0.6), (1, 0.6), (0, -1)]}
_CSS_FONT = re.compile(r"'([^']*)'")


def figure_svg(fig: go.Figure | dict) -> str:
    """``fig`` as an SVG element, as tall as its layout's ``height`` and showing the axes' ranges
    at one unit per pixel (x and y alike; y grows upwards), under its top margin."""
    d = fig.to_plotly_json() if isinstance(fig, go.Figure) else fig
    lay = d.get("layout", {})
    (x0, x1), (y0, y1) = lay["xaxis"]["range"], lay["yaxis"]["range"]
    top = lay.get("margin", {}).get("t", 0)
    height = lay.get("height") or (y1 - y0 + top)
    font = _CSS_FONT.sub(r'"\1"', lay.get("font", {}).get("family", "sans-serif"))

    def xy(x: float, y: float) -> tuple[float, float]:  # figure units -> SVG pixels (y down)
        return x - x0, y1 - y

    parts = []
    for t in d.get("data", []):
        if t.get("type", "scatter") == "scatter" and t.get("visible", True) is True:
            parts += _trace(t, xy)
    parts += [_annotation(a, xy) for a in lay.get("annotations", [])]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{x1 - x0:.0f}" height="{height:.0f}" '
            f'viewBox="0 {-top} {x1 - x0:.0f} {height:.0f}" font-family=\'{font}\' role="img" '
            f'style="overflow:hidden;display:block;background:#fff">{"".join(parts)}</svg>')


def _pieces(xs: list, ys: list) -> list[list[tuple[float, float]]]:
    """A trace's points, split where Plotly breaks the line (a None)."""
    out, cur = [], []
    for x, y in zip(xs, ys):
        if x is None or y is None:
            out, cur = out + [cur] * bool(cur), []
        else:
            cur.append((x, y))
    return out + [cur] * bool(cur)


def _paint(colour: str | None) -> str:
    """An SVG colour for a Plotly one: fully transparent colours are 'none'."""
    if not colour or re.fullmatch(r"rgba\([^)]*,\s*0(\.0*)?\)", colour.replace(" ", "")):
        return "none"
    return colour


def _each(value: Any, n: int) -> list:
    """A per-point attribute: a list as is, a scalar repeated."""
    return list(value) if isinstance(value, (list, tuple)) else [value] * n


def _trace(t: dict, xy) -> list[str]:
    mode, out = t.get("mode", "lines"), []
    xs, ys = list(t.get("x", [])), list(t.get("y", []))
    line = t.get("line", {})
    if "lines" in mode:
        stroke = f'stroke="{_paint(line.get("color", "#444"))}" stroke-width="{line.get("width", 2)}"'
        if line.get("dash") in ("dot", "dash"):
            stroke += f' stroke-dasharray="{"2,3" if line["dash"] == "dot" else "6,4"}"'
        filled = t.get("fill") == "toself"
        fill = _paint(t.get("fillcolor")) if filled else "none"
        for piece in _pieces(xs, ys):
            tag = "polygon" if filled else "polyline"
            pts = " ".join("{:.1f},{:.1f}".format(*xy(x, y)) for x, y in piece)
            out.append(f'<{tag} points="{pts}" fill="{fill}" {stroke}/>')
    if "markers" in mode:
        out += _markers(t, xs, ys, xy)
    if "text" in mode:
        out += _texts(t, xs, ys, xy)
    return out


def _markers(t: dict, xs: list, ys: list, xy) -> list[str]:
    m, out = t.get("marker", {}), []
    n = len(xs)
    for x, y, size, symbol, colour in zip(xs, ys, _each(m.get("size", 6), n), _each(m.get("symbol", "circle"), n),
                                          _each(m.get("color", "#444"), n)):
        if x is None or y is None:
            continue
        base, hollow = symbol.removesuffix("-open"), symbol.endswith("-open")
        edge = m.get("line", {})
        fill = "none" if hollow else _paint(colour)
        stroke = _paint(colour if hollow else edge.get("color"))
        width = edge.get("width", 0) or (1 if hollow else 0)
        if fill == "none" and (stroke == "none" or not width):
            continue  # an invisible click target
        cx, cy = xy(x, y)
        r = size / 2
        style = f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"'
        if base in _OUTLINES:
            pts = " ".join(f"{cx + r * u:.1f},{cy + r * v:.1f}" for u, v in _OUTLINES[base])
            out.append(f'<polygon points="{pts}" {style}/>')
        else:
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" {style}/>')
    return out


def _texts(t: dict, xs: list, ys: list, xy) -> list[str]:
    font, n = t.get("textfont", {}), len(xs)
    out = []
    for x, y, text, pos in zip(xs, ys, _each(t.get("text", ""), n), _each(t.get("textposition", "middle center"), n)):
        if x is None or y is None or not text:
            continue
        anchor = "start" if pos.endswith("right") else "end" if pos.endswith("left") else "middle"
        out.append(_text(str(text), xy(x, y), anchor, font.get("size", 12), font.get("color", "#444")))
    return out


def _annotation(a: dict, xy) -> str:
    font = a.get("font", {})
    anchor = {"left": "start", "right": "end"}.get(a.get("xanchor", "center"), "middle")
    return _text(str(a.get("text", "")), xy(a["x"], a["y"]), anchor, font.get("size", 12), font.get("color", "#444"),
                 background=_paint(a.get("bgcolor")))


def _text(text: str, at: tuple[float, float], anchor: str, size: float, colour: str, background: str = "none") -> str:
    """Plotly's pseudo-HTML (``<b>``, ``<i>``, ``<br>``) as SVG lines centred vertically on ``at``;
    ``background`` is drawn as the text's halo (a wide stroke under the glyphs)."""
    lines: list[list[str]] = [[]]
    bold = italic = False
    for tok in _TOKEN.findall(text):
        low = tok.lower()
        if low.startswith("<br"):
            lines.append([])
        elif low in ("<b>", "</b>"):
            bold = low == "<b>"
        elif low in ("<i>", "</i>"):
            italic = low == "<i>"
        elif tok == "<" or not tok.startswith("<"):
            style = ' font-weight="bold"' * bold + ' font-style="italic"' * italic
            lines[-1].append(f"<tspan{style}>{escape(tok, quote=False)}</tspan>")
    x, y = (f"{v:.1f}" for v in at)
    first = -(len(lines) - 1) / 2 * LINE_EM
    spans = "".join(f'<tspan x="{x}" dy="{(first if i == 0 else LINE_EM):.3g}em">{"".join(parts)}</tspan>'
                    for i, parts in enumerate(lines))
    halo = f' stroke="{background}" stroke-width="3" paint-order="stroke"' if background != "none" else ""
    return (f'<text x="{x}" y="{y}" font-size="{size}" fill="{colour}" text-anchor="{anchor}" '
            f'dominant-baseline="central"{halo}>{spans}</text>')
