"""Legends that leave a plot its width: placed below the plot, naming each variant by its
number (``v3``) while the hover keeps its whole action chain, wrapped to a readable width.

A legend at the right of a Plotly figure takes the width of its longest entry: a variant named
after its actions left a roofline 64 px wide.
"""

from __future__ import annotations

import re
import textwrap

__all__ = ["LEGEND_BELOW", "NAME_CHARS", "short_name", "hover_lines"]

#: a horizontal legend under the plot (Plotly grows the bottom margin to hold its rows)
LEGEND_BELOW = {"orientation": "h", "x": 0.0, "xanchor": "left", "yref": "container", "y": 0.0, "yanchor": "bottom"}
#: the most characters of a name in a legend (the hover has it whole)
NAME_CHARS = 24
#: characters per line of a hover's long text
HOVER_CHARS = 64

_NUMBERED = re.compile(r"(v\d+)(?::.*)?", re.DOTALL)


def short_name(label: str) -> str:
    """A variant's name in legends and axis labels: its number for a tab's variant (one measured
    before short names reads ``v3: <action chain>``), any other label cut to ``NAME_CHARS``.

    >>> short_name("v3: conv: split, reorder · pad: fuse"), short_name("v12"), short_name("plain")
    ('v3', 'v12', 'plain')
    >>> short_name("current (a-session-name-of-some-length)")
    'current (a-session-name…'
    """
    if m := _NUMBERED.fullmatch(label):
        return m.group(1)
    return label if len(label) <= NAME_CHARS else label[:NAME_CHARS - 1] + "…"


def hover_lines(text: str, width: int = HOVER_CHARS) -> str:
    """``text`` wrapped into hover lines (``<br>``) of at most ``width`` characters.

    >>> hover_lines("conv: split, reorder · data@conv: unfold · conv: parallel", 24)
    'conv: split, reorder ·<br>data@conv: unfold ·<br>conv: parallel'
    """
    return "<br>".join(textwrap.wrap(text, width)) or text
