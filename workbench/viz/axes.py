"""Log axes people can read: ticks at 1-2-5 (or denser) steps labelled in plain numbers.

Plotly's own log ticks label the minor steps with their first digit only ("7 6 5 4 3 2 100 9 8"),
which reads as a descending sequence; ``log_axis`` gives Plotly explicit tick values instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["log_ticks", "log_axis"]

# mantissas per decade, sparsest first
_STEPS = ((1,), (1, 2, 5), (1, 2, 3, 5, 7), (1, 2, 3, 4, 5, 6, 7, 8, 9))


def _label(v: float) -> str:
    """Plain numbers, with SI prefixes from a thousand up (one style along an axis: not
    "100000" beside "1e6").

    >>> [_label(v) for v in (0.0001, 0.02, 5, 1000, 2e5, 1e6, 1.5e9)]
    ['1e-4', '0.02', '5', '1k', '200k', '1M', '1.5G']
    """
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g}{prefix}"
    return f"{v:.0e}".replace("e-0", "e-") if v < 1e-3 else f"{v:g}"


def log_ticks(lo: float, hi: float, least: int = 3, most: int = 8) -> list[float]:
    """Tick values in ``[lo, hi]`` at the sparsest mantissa steps giving at least ``least``
    ticks (decades only, thinned to at most ``most``, when even those are many).

    >>> log_ticks(0.8, 9.5)
    [1.0, 2.0, 5.0]
    >>> log_ticks(1.1, 1.9)
    [1.1, 1.3, 1.5, 1.7, 1.9]
    >>> log_ticks(1e-3, 1e3)
    [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
    >>> log_ticks(1e-6, 1e6, most=5)
    [1e-06, 0.001, 1.0, 1000.0, 1000000.0]
    """
    if not (0 < lo <= hi) or not math.isfinite(hi):
        return []
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mantissas in _STEPS:
        ticks = [float(f"{m}e{e}") for e in range(first, last + 1) for m in mantissas if lo <= m * 10.0 ** e <= hi]
        if len(ticks) > most:  # many decades: every k-th decade
            k = math.ceil(len(ticks) / most)
            return ticks[::k]
        if len(ticks) >= least:
            return ticks
    # a range narrower than one digit step: evenly spaced round values
    step = 10.0 ** math.floor(math.log10(hi - lo)) if hi > lo else 10.0 ** first
    ticks = [round(n * step, 12) for n in range(math.ceil(round(lo / step, 9)), math.floor(round(hi / step, 9)) + 1)]
    if len(ticks) > most:
        ticks = ticks[::math.ceil(len(ticks) / most)]
    return ticks or [lo]


def _step(v: float, up: bool) -> float:
    """The 1-2-5 value next to ``v``: the least at or above it (``up``), else the greatest at or below.

    >>> _step(3.85, False), _step(3.85, True), _step(20.0, True), _step(0.19, False)
    (2.0, 5.0, 20.0, 0.1)
    """
    e = math.floor(math.log10(v))
    steps = [m * 10.0 ** k for k in (e - 1, e, e + 1) for m in (1, 2, 5)]
    return min(x for x in steps if x >= v * (1 - 1e-9)) if up else max(x for x in steps if x <= v * (1 + 1e-9))


def log_axis(values: Iterable[float | None], title: str | None = None, **extra: object) -> dict:
    """A Plotly log-axis dict whose ticks cover the positive ``values`` (Plotly's own ticks when
    there are none). Without a given ``range`` the axis runs from the 1-2-5 value below the
    data to the one above it (with a little room), so the lowest and highest points have a tick
    beyond them to be read against."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    axis: dict = {"type": "log", **extra}
    if title is not None:
        axis["title"] = title
    if vals:
        lo, hi = min(vals), max(vals)
        ticks = log_ticks(lo, hi)
        if "range" not in extra:
            lo, hi = _step(lo / 1.05, up=False), _step(hi * 1.05, up=True)
            ticks = log_ticks(lo, hi)
            if ticks and ticks[0] > min(vals):  # decades only, over a wide range: one decade more each way
                lo = ticks[0] / 10
            if ticks and ticks[-1] < max(vals):
                hi = ticks[-1] * 10
            ticks = log_ticks(lo, hi)
            axis["range"] = [math.log10(lo), math.log10(hi)]
        axis.update(tickmode="array", tickvals=ticks, ticktext=[_label(t) for t in ticks])
    return axis
