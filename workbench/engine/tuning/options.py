"""How to tune (``TuneOptions``, shared by both stages and the worker), how a budget of
measurements is shared among kernels (``budget_shares``, the one splitter) and by what weight
(``loss_weights``: where the network loses time)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..base.errors import TuneError
from .rpc import RpcConfig

__all__ = ["BUILD_TIMEOUT_S", "SEARCHES", "SPLITS", "TuneOptions", "budget_shares", "loss_weights"]

#: seconds a candidate's build may take before it is recorded as failed
BUILD_TIMEOUT_S = 60.0

SEARCHES = ("model", "random")
#: how a joint tuning splits its budget over the ops: by measured loss (``loss_weights``) or by FLOPs
SPLITS = ("loss", "flops")


@dataclass(frozen=True)
class TuneOptions:
    """Everything about a tuning but what to tune, where, and its budget.

    Parameters
    ----------
    rpc : RpcConfig or None
        Time candidates on this tracker's servers (builds stay local); None times them here.
    progress_path : Path or None
        Append one JSON line per measurement there (see ``progress``).
    seed : int or None
        Seeds the search (None: unseeded).
    isolated : bool
        Build and time candidates in TVM's worker processes (protection from a crashing
        candidate, but ~10 s to start the pools) instead of this process.
    num_trials_per_iter : int
        Candidates MetaSchedule measures per batch.
    build_timeout_s : float
        A candidate whose build takes longer is recorded as failed (in this process: its build is
        left to finish in the background at the lowest priority).
    joint_fraction : float
        The joint stage's share of an op's budget (the rest goes to the loop-only stage).
    per_candidate : int
        Measurements that score one layout candidate: its expert schedule first (``expert_seed``),
        then a short MetaSchedule search.
    search : str
        How the joint stage picks layout candidates: ``model`` (cost-model-guided) or ``random``.
    expert_seed : bool
        Measure each kernel's expert schedule first and seed the search with it (``seed``).
    warmup_samples : int
        Measurements before MetaSchedule's XGBoost model ranks candidates (TVM's default, 100,
        makes a search of a 64-measurement budget random).
    genetic_num_iters : int
        Generations of mutation the evolutionary search runs per batch (TVM's default: 4).
    population_size : int
        Schedules the evolutionary search evolves per batch (TVM's default, 512, spends most of
        a measurement's time searching).
    settle_fraction : float
        The share of a joint tuning's budget kept to tune again, in their final form, the kernels
        that later layouts changed (``settle``); what the joint stage leaves unused goes there too.
    keep_faster : bool
        Time the tuned network against its seeds and starting point and keep the fastest
        (``stages.tune_network``).
    split : str
        How the joint stage shares its budget among the ops: ``loss``, by the time each op's
        kernel loses in the network on its expert schedule (``loss_weights``: measured time above
        what the network's best FLOP rate would give; the network is built and timed once first);
        ``flops`` (the default until ``loss`` is shown to win), by FLOPs alone.
    cold : bool
        Time each candidate one call at a time with every argument but its first (a kernel's
        weights, not the activation the kernel before it wrote) flushed from the CPU caches
        (MetaSchedule's cache flush), as inside a network whose weights outgrow the caches;
        False: repeated calls on warm caches.

    >>> TuneOptions(search="greedy")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.TuneError: search must be 'model' or 'random', got 'greedy'
    """

    rpc: RpcConfig | None = None
    progress_path: Path | None = None
    seed: int | None = 0
    isolated: bool = False
    num_trials_per_iter: int = 8
    build_timeout_s: float = BUILD_TIMEOUT_S
    joint_fraction: float = 0.3
    per_candidate: int = 1
    search: str = "model"
    expert_seed: bool = True
    warmup_samples: int = 8
    population_size: int = 128
    genetic_num_iters: int = 3
    settle_fraction: float = 0.25
    keep_faster: bool = True
    split: str = "flops"
    cold: bool = False

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise TuneError(f"search must be 'model' or 'random', got {self.search!r}")
        if self.split not in SPLITS:
            raise TuneError(f"split must be 'loss' or 'flops', got {self.split!r}")
        if not self.build_timeout_s > 0:
            raise TuneError(f"build_timeout_s must be positive, got {self.build_timeout_s}")
        if not 0.0 <= self.settle_fraction < 1.0:
            raise TuneError(f"settle_fraction must lie in [0, 1), got {self.settle_fraction}")
        if self.num_trials_per_iter < 1:
            raise TuneError(f"num_trials_per_iter must be at least 1, got {self.num_trials_per_iter}")

    def seed_plus(self, offset: int) -> int | None:
        """The seed of a sub-run (None stays None).

        >>> TuneOptions(seed=1).seed_plus(1000), TuneOptions(seed=None).seed_plus(1000)
        (1001, None)
        """
        return None if self.seed is None else self.seed + offset


def budget_shares(weights: Sequence[float], budget: int, minimum: int = 1) -> list[int]:
    """Split ``budget`` measurements in proportion to ``weights`` (FLOPs, each counted as at
    least 1), at least ``minimum`` each, summing to ``budget``: each gets ``minimum`` plus its
    share of the rest rounded down, and the largest remainders get what rounding left.

    >>> budget_shares([3_000, 1_000], 16)
    [12, 4]
    >>> budget_shares([10**9, 1, 1], 5)
    [3, 1, 1]
    >>> budget_shares([100.0, 1.0], 10, minimum=2)
    [8, 2]

    Raises
    ------
    TuneError
        ``budget`` is smaller than ``minimum`` for each.
    """
    n = len(weights)
    if budget < minimum * n:
        raise TuneError(f"a budget of {budget} measurements cannot give each of {n} kernels "
                        f"{'one' if minimum == 1 else minimum}")
    if not n:
        return []
    ws = [max(float(w), 1.0) for w in weights]
    total, spare = sum(ws), budget - minimum * n
    exact = [spare * w / total for w in ws]
    shares = [minimum + int(x) for x in exact]
    order = sorted(range(n), key=lambda i: int(exact[i]) - exact[i])  # largest remainders first
    for i in order[:budget - sum(shares)]:
        shares[i] += 1
    return shares


#: a kernel that already runs at the network's best rate keeps this share of its time as weight:
#: its rate may be the one that is low (tiny kernels, memory-bound ones)
LOSS_FLOOR = 0.1


def loss_weights(flops: Sequence[float], ms: Sequence[float]) -> list[float]:
    """Each kernel's measured time (``ms``) above what its ``flops`` would take at the best rate
    any of them reaches (FLOPs per ms), at least ``LOSS_FLOOR`` of its time: the time tuning can
    win there, by time share and by distance from the best kernel (a slow kernel of few FLOPs
    weighs more than its FLOPs; a fast one of many FLOPs less).

    >>> [round(w, 2) for w in loss_weights([100.0, 100.0, 10.0], [1.0, 2.0, 1.0])]
    [0.1, 1.0, 0.9]

    Raises
    ------
    TuneError
        Lengths differ, or a time is not positive.
    """
    if len(flops) != len(ms):
        raise TuneError(f"{len(flops)} FLOP counts for {len(ms)} times")
    if any(not m > 0 for m in ms):
        raise TuneError(f"every kernel time must be positive, got {list(ms)}")
    best = max((f / m for f, m in zip(flops, ms)), default=0.0)
    return [max(m - (f / best if best > 0 else 0.0), LOSS_FLOOR * m) for f, m in zip(flops, ms)]
