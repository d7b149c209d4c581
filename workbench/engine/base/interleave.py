"""Interleaved re-measurement: several contenders timed in turn (A B C D, A B C D, ...) so that
a busy moment of a shared machine slows every one of them, not just the one measured then.

Each contender is a *timer*: a callable that takes one sample and returns it in ms. After
``rounds`` rounds every contender has a median and a relative spread ((max - min) / median, as
in ``timing.Stats``). A contender whose spread exceeds ``noise`` is measured again with one more
set of rounds (the noisy ones interleaved among themselves); the quieter of its two sets is
reported, and it is flagged ``noisy`` when even that one stays above ``noise`` (``remeasure``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping

import psutil

from .timing import NOISE, Stats

__all__ = ["Timer", "Remeasured", "ROUNDS", "SAMPLE_MS", "call_timer", "interleaved_samples", "remeasure",
           "wait_for_quiet"]

#: one sample of a contender, in ms
Timer = Callable[[], float]
#: one timing sample lasts about this long (the call repeated as often as it takes)
SAMPLE_MS = 50.0
#: rounds per set: each contender gets this many samples, one per round
ROUNDS = 5
#: the longest wait for quiet before each sample (``wait_for_quiet``): a contender's thread
#: pools (TVM's, OpenMP's) spin on after it returns and would take the next contender's cores
SETTLE_S = 2.0
#: quiet: the machine's cores idle for at least this share of a ``WINDOW_S`` window
QUIET = 0.9
WINDOW_S = 0.05


def call_timer(fn: Callable[[], object], min_ms: float = SAMPLE_MS) -> Timer:
    """A timer of ``fn``: each sample (ms per call) repeats it for about ``min_ms``, the count
    fixed once after a warm-up call."""
    fn()
    t0 = time.perf_counter()
    fn()
    number = max(1, int(min_ms / 1e3 / max(time.perf_counter() - t0, 1e-6)))

    def sample() -> float:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - t0) / number * 1e3

    return sample


def wait_for_quiet(max_s: float = SETTLE_S) -> float:
    """Wait until the machine's cores have been idle for ``QUIET`` of a ``WINDOW_S`` window
    (every pool of the last contender asleep, in any process), at most ``max_s`` seconds;
    returns the seconds waited (a busy machine still gets measured, after ``max_s``)."""
    start = time.perf_counter()
    before = psutil.cpu_times()
    while time.perf_counter() - start < max_s:
        time.sleep(WINDOW_S)
        now = psutil.cpu_times()
        total = sum(now) - sum(before)
        idle = now.idle + getattr(now, "iowait", 0.0) - before.idle - getattr(before, "iowait", 0.0)
        if total <= 0 or idle >= QUIET * total:
            break
        before = now
    return time.perf_counter() - start


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
    """``rounds`` samples of every timer, taken in turn: A B C D, A B C D, ..., each once the
    machine is quiet (``wait_for_quiet(settle_s)``; see ``SETTLE_S``)."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            wait_for_quiet(settle_s)
            samples[name].append(float(timer()))
    return samples


def remeasure(timers: Mapping[str, Timer], rounds: int = ROUNDS, noise: float = NOISE,
              settle_s: float = SETTLE_S) -> dict[str, Remeasured]:
    """Interleave all timers for ``rounds`` rounds; measure the noisy ones (relative spread above
    ``noise``) again with one more interleaved set; report each contender's quieter set.

    >>> script = {"A": iter([1.0, 1.0, 1.0]), "B": iter([2.0, 3.0, 2.0, 2.0, 2.0, 2.0])}
    >>> got = remeasure({k: (lambda it=it: next(it)) for k, it in script.items()}, rounds=3, settle_s=0)
    >>> got["A"].stats.median_ms, got["A"].stats.rounds, got["A"].noisy
    (1.0, 1, False)
    >>> got["B"].stats.median_ms, got["B"].stats.rounds, got["B"].noisy
    (2.0, 2, False)
    """
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
