"""Time left in a tuning run, smoothed so that it does not jump about between polls.

The rate is a moving one: the seconds per measurement over the last ``WINDOW`` measurements.
MetaSchedule writes a batch's lines at once, so the measurements are counted at each distinct
time (a batch adds its size at the time it was written). The projected finish only moves
earlier while the rate holds; a rate that differs from the one it rests on by more than
``RATE_CHANGE`` (30%) replaces it, and only then may the time left grow. Times are passed in
(seconds since the epoch): nothing here reads the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["WINDOW", "RATE_CHANGE", "Eta", "moving_rate", "smoothed_eta"]

#: measurements the moving rate looks back over
WINDOW = 16
#: a new rate replaces the held one when they differ by more than this share
RATE_CHANGE = 0.3


@dataclass(frozen=True)
class Eta:
    """The held rate (seconds per measurement) and the projected finish (epoch seconds); both
    None while estimating (fewer than two distinct measurement times)."""

    rate_s: float | None = None
    finish: float | None = None

    def left_s(self, now: float) -> float | None:
        """Seconds left at ``now`` (0 once the projected finish has passed), None while estimating."""
        return None if self.finish is None else max(0.0, self.finish - now)


def _points(times: Sequence[float]) -> list[tuple[float, int]]:
    """(time, measurements done by then) at each distinct time, in time order.

    >>> _points([3.0, 1.0, 3.0, 3.0, 4.0])
    [(1.0, 1), (3.0, 4), (4.0, 5)]
    """
    points: list[tuple[float, int]] = []
    for done, t in enumerate(sorted(float(x) for x in times), start=1):
        if points and points[-1][0] == t:
            points[-1] = (t, done)
        else:
            points.append((t, done))
    return points


def moving_rate(times: Sequence[float], window: int = WINDOW) -> float | None:
    """Seconds per measurement over the last ``window`` measurements (back to the earliest
    distinct time at least that far back, or the first one); None with fewer than two
    distinct times.

    >>> moving_rate([0.0, 2.0, 4.0, 10.0, 12.0], window=2), moving_rate([0.0, 2.0, 4.0, 10.0, 12.0], window=4)
    (4.0, 3.0)
    >>> moving_rate([5.0] * 8 + [13.0] * 8), moving_rate([5.0, 5.0])
    (1.0, None)
    """
    return _rate(_points(times), window)


def _rate(points: list[tuple[float, int]], window: int) -> float | None:
    if len(points) < 2:
        return None
    t1, n1 = points[-1]
    t0, n0 = next(((t, n) for t, n in reversed(points[:-1]) if n <= n1 - window), points[0])
    return (t1 - t0) / (n1 - n0)


def smoothed_eta(times: Sequence[float], budget: int, window: int = WINDOW,
                 change: float = RATE_CHANGE) -> Eta:
    """The projected finish of a run of ``budget`` measurements whose measurements so far were
    written at ``times``: replayed measurement by measurement, the finish at the held rate only
    moves earlier, and a moving rate off the held one by more than ``change`` re-projects it.

    >>> e = smoothed_eta([10.0, 12.0, 14.0], budget=10)
    >>> e.rate_s, e.finish, e.left_s(20.0)
    (2.0, 28.0, 8.0)
    >>> smoothed_eta([10.0, 12.0, 14.0, 17.0], budget=10).finish  # 2.33 s each: within 30%, not later
    28.0
    >>> smoothed_eta([10.0, 12.0, 14.0, 24.0], budget=10).rate_s  # 4.67 s each: a new rate
    4.666666666666667
    """
    points = _points(times)
    rate = finish = None
    for i, (t, done) in enumerate(points):
        got = _rate(points[:i + 1], window)
        if got is None:
            continue
        fresh = t + got * max(0, budget - done)
        if rate is None or finish is None or _changed(got, rate, change):
            rate, finish = got, fresh
        else:
            finish = min(finish, fresh)
    return Eta(rate, finish)


def _changed(rate: float, held: float, change: float) -> bool:
    """Whether ``rate`` differs from ``held`` by more than the share ``change``."""
    return abs(rate - held) > change * held
