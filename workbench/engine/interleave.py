"""Interleaved re-measurement: several contenders timed in turn (A B C D, A B C D, ...) so that
a busy moment of a shared machine slows every one of them, not just the one measured then.

Each contender is a *timer*: a callable that takes one sample and returns it in ms. After
``rounds`` rounds every contender has a median and a relative spread ((max - min) / median, as
in ``timing.Stats``). A contender whose spread exceeds ``noise`` is measured again with one more
set of rounds (the noisy ones interleaved among themselves); the quieter of its two sets is
reported, and it is flagged ``noisy`` when even that one stays above ``noise``.

>>> script = {"A": iter([1.0, 1.0, 1.0]), "B": iter([2.0, 3.0, 2.0, 2.0, 2.0, 2.0])}
>>> got = remeasure({k: (lambda it=it: next(it)) for k, it in script.items()}, rounds=3, settle_s=0)
>>> got["A"].stats.median_ms, got["A"].stats.rounds, got["A"].noisy
(1.0, 1, False)
>>> got["B"].stats.median_ms, got["B"].stats.rounds, got["B"].noisy
(2.0, 2, False)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from .timing import NOISE, Stats

__all__ = ["Timer", "Remeasured", "ROUNDS", "interleaved_samples", "remeasure"]

#: one sample of a contender, in ms
Timer = Callable[[], float]
#: rounds per set: each contender gets this many samples, one per round
ROUNDS = 5
#: seconds of quiet before each sample: a contender's thread pools spin on after it returns
#: (OpenMP's blocktime is up to 200 ms, ONNX Runtime's and TVM's pools spin too) and, on 2
#: cores, took the next contender's cores: PyTorch's ResNet-18 measured 98 ms after our
#: kernels and ONNX Runtime, 46-51 ms alone
SETTLE_S = 0.25


@dataclass(frozen=True)
class Remeasured:
    """A contender's reported set of samples (``stats.rounds``: 1, or 2 when measured again) and
    whether it stayed noisy."""

    stats: Stats
    noisy: bool

    @property
    def median_ms(self) -> float:
        return self.stats.median_ms

    @property
    def relative_spread(self) -> float:
        return self.stats.relative_spread


def interleaved_samples(timers: Mapping[str, Timer], rounds: int = ROUNDS,
                        settle_s: float = SETTLE_S) -> dict[str, list[float]]:
    """``rounds`` samples of every timer, taken in turn: A B C D, A B C D, ..., each after
    ``settle_s`` seconds of quiet (see ``SETTLE_S``)."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            time.sleep(settle_s)
            samples[name].append(float(timer()))
    return samples


def remeasure(timers: Mapping[str, Timer], rounds: int = ROUNDS, noise: float = NOISE,
              settle_s: float = SETTLE_S) -> dict[str, Remeasured]:
    """Interleave all timers for ``rounds`` rounds; measure the noisy ones (relative spread above
    ``noise``) again with one more interleaved set; report each contender's quieter set."""
    first = {name: Stats.of(s) for name, s in interleaved_samples(timers, rounds, settle_s).items()}
    noisy = [name for name, st in first.items() if st.relative_spread > noise]
    second = {name: Stats.of(s)
              for name, s in interleaved_samples({n: timers[n] for n in noisy}, rounds, settle_s).items()} if noisy else {}
    out = {}
    for name, st in first.items():
        sets = [st] + ([second[name]] if name in second else [])
        best = min(sets, key=lambda x: x.relative_spread)  # on a tie, the first set
        out[name] = Remeasured(replace(best, rounds=len(sets)), best.relative_spread > noise)
    return out
