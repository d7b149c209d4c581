"""Timing statistics a user can trust: every latency carries its median, minimum, spread and
repeat count; a noisy measurement is repeated (up to a cap) and flagged when it stays noisy; and
two measurements are compared against their noise, not by their medians alone.

>>> quiet = Stats.of([1.00, 1.01, 0.99, 1.02, 1.00])
>>> quiet, quiet.noisy
(Stats(median_ms=1.0, min_ms=0.99, max_ms=1.02, repeats=5, rounds=1), False)
>>> compare(Stats.of([2.0, 2.02, 1.98]), quiet)
'2.00x slower'
>>> compare(Stats.of([1.01, 1.03, 0.98]), quiet)
'within noise'
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

__all__ = ["Stats", "NOISE", "MAX_ROUNDS", "measure_until_quiet", "compare"]

#: relative spread ((max - min) / median) above which a measurement is repeated, then flagged
NOISE = 0.10
#: rounds of repeats at most, before a measurement is reported as noisy
MAX_ROUNDS = 3


@dataclass(frozen=True)
class Stats:
    """One measurement: the median, min and max of ``repeats`` samples (ms), after ``rounds``."""

    median_ms: float
    min_ms: float
    max_ms: float
    repeats: int
    rounds: int = 1

    @staticmethod
    def of(samples_ms: Sequence[float], rounds: int = 1) -> Stats:
        a = np.asarray(samples_ms, dtype=float)
        return Stats(round(float(np.median(a)), 9), float(a.min()), float(a.max()), len(a), rounds)

    @property
    def spread_ms(self) -> float:
        return self.max_ms - self.min_ms

    @property
    def relative_spread(self) -> float:
        return self.spread_ms / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return self.relative_spread > NOISE


def measure_until_quiet(sample: Callable[[], Sequence[float]], noise: float = NOISE,
                        max_rounds: int = MAX_ROUNDS) -> Stats:
    """Call ``sample`` (one round of repeats, in ms) until a round's relative spread is at most
    ``noise`` or ``max_rounds`` rounds ran; the quietest round is reported, with the number of
    rounds it took (``noisy`` tells when even that one stayed noisy)."""
    best: Stats | None = None
    for rounds in range(1, max_rounds + 1):
        got = Stats.of(sample())
        if best is None or got.relative_spread < best.relative_spread:
            best = got
        if best.relative_spread <= noise:
            break
    assert best is not None
    return replace(best, rounds=rounds)


def compare(a: Stats, b: Stats) -> str:
    """``a`` against ``b``: "N.NNx faster" / "N.NNx slower" when their sample ranges do not
    overlap, else "within noise"."""
    if a.max_ms < b.min_ms:
        return f"{b.median_ms / a.median_ms:.2f}x faster"
    if b.max_ms < a.min_ms:
        return f"{a.median_ms / b.median_ms:.2f}x slower"
    return "within noise"
