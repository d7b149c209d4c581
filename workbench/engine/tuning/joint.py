"""ALT's joint layout + loop stage (paper section 5) for one complex op.

The layout space comes from the one-level templates (``presets.alt_tiled`` for the conv family:
output tiles per spatial dim, ``ot``, ``it``; ``presets.nkn`` for GMM: ``m``, ``n``; for a
contraction expression op, its output ``blocked`` along one dim, the block innermost). *Cross
exploration*: a layout candidate is scored by its kernel's expert schedule (the seed of a
MetaSchedule loop tuning of ``options.per_candidate`` measurements, one by default); only
candidates whose vectorized dim fills whole vector registers are proposed. A score adds the time
of the stand-alone conversions the layout brings beyond the default layout's (``ConversionCosts``).
The search is a local search guided by a cost model (XGBoost on template features; ``_pick``),
which must beat random sampling at the same budget (``TuneOptions(search="random")``). The
default layout is always the first candidate, so the result is measured against it too; the
result is a session ``Step`` (``JointResult.step``).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import tvm_ffi

from ..base.errors import TuneError, WorkbenchError
from ..ir.ops import per_dim
from ..ir.graph import Graph
from ..layout.book import LayoutBook
from ..layout.keys import apply_actions
from ..layout.presets import preset_actions
from ..build.program import Program, make_program
from ..measure.ceilings import copy_bandwidth
from ..measure.conversion_rates import conversion_bytes
from ..schedules.conversion.bandwidth import conversion_ms
from ..base.step import Step
from ..build.targets import vector_unit
from .loop import tune_loops
from .options import TuneOptions
from .records import TuneTask, renamed_trace
from .runner import Measurers

__all__ = ["Candidate", "ConversionCosts", "JointResult", "layout_space", "candidates_scored", "joint_tune"]

_TILES = (1, 2, 4, 7, 8, 14, 16, 28, 32)
_CHANNELS = (1, 2, 3, 4, 8, 16, 32, 64)
_GMM = (4, 8, 16, 24, 32, 48, 64, 128)


@dataclass(frozen=True)
class Candidate:
    """One point of the layout space: a preset and its parameters (``None`` = default layout)."""

    preset: str | None
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def kwargs(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params}

    @property
    def label(self) -> str:
        if self.preset is None:
            return "default"
        return f"{self.preset}(" + ", ".join(f"{k}={v}" for k, v in self.kwargs.items()) + ")"

    def actions(self, graph: Graph, op: str) -> list[Step]:
        """The layout primitives this candidate applies (none for the default layout)."""
        return preset_actions(graph, self.preset, op, **self.kwargs) if self.preset else []

    def step(self, op: str) -> Step | None:
        """The session step that applies this candidate to ``op`` (None for the default layout)."""
        return Step.make("preset", op, self.preset, **self.kwargs) if self.preset else None

    def features(self) -> list[float]:
        """log2 of every template parameter (tiles flattened), 0 for the default layout."""
        vals: list[float] = [1.0 if self.preset is None else 0.0]
        for _, v in self.params:  # a dim number may be 0: -1 then
            vals += [math.log2(x) if x > 0 else -1.0 for x in (v if isinstance(v, tuple) else (v,))]
        return vals


def _divisors(n: int, pool: tuple[int, ...]) -> list[int]:
    return [d for d in pool if d <= n and n % d == 0] or [1]


def _phase_tiles(tiles: list[int], n: int, stride: int) -> list[int]:
    """A transposed conv's tiles along an output dim of ``n`` and stride ``stride``: multiples of
    2 * stride, so that the tile's loop holds q = 2 or more steps of y = s*q + r and the expert
    template can see the phases (a tile of one phase, 2 on stride 2, left the 3-D decoder's kernel
    1.8x slower); the whole dim when no tile is such; all of them where there are no phases
    (stride 1, or a stride that does not divide the dim).

    >>> _phase_tiles([1, 2, 4, 8, 32], 32, 2), _phase_tiles([1, 5], 15, 3), _phase_tiles([1, 2, 7, 14], 14, 1)
    ([4, 8, 32], [15], [1, 2, 7, 14])
    """
    if stride <= 1 or n % stride:
        return tiles
    return [t for t in tiles if t % (2 * stride) == 0 or t == n] or [n]


def _fills_lanes(c: Candidate, full: int, lanes: int) -> bool:
    """The candidate's innermost stored dim (``ot`` / GMM's ``n`` / a block's ``factor``,
    vectorized by the expert schedule) is a whole number of vector registers, or the whole dim
    when that is narrower."""
    inner = c.kwargs.get("ot", c.kwargs.get("n", c.kwargs.get("factor")))
    return inner is None or inner % lanes == 0 or inner == full < lanes


def layout_space(graph: Graph, op: str, lanes: int | None = None) -> list[Candidate]:
    """Every template candidate for ``op``, default layout first; with ``lanes`` (the target's
    fp32 lanes), only those whose vectorized dim fills whole registers (all when none does)."""
    space = _template_space(graph, op)
    if lanes:
        shape = graph.tensors[op].shape
        full = shape[1 if graph.node(op).type.startswith("conv") else -1]
        kept = [c for c in space if _fills_lanes(c, shape[c.kwargs["dim"]] if c.preset == "blocked" else full, lanes)]
        space = kept if len(kept) > 1 else space
    return space


def _template_space(graph: Graph, op: str) -> list[Candidate]:
    node = graph.node(op)
    out = graph.tensors[op].shape
    space = [Candidate(None)]
    if node.type.startswith("conv"):
        cin = graph.tensors[node.inputs[0]].shape[1]
        tiles = [_divisors(n, _TILES) for n in out[2:]]
        if node.type.startswith("conv_transpose"):
            tiles = [_phase_tiles(ts, n, s) for ts, n, s in zip(tiles, out[2:], per_dim(node.kwargs, "stride", len(out) - 2, 1))]
        for ts, ot, it in itertools.product(itertools.product(*tiles), _divisors(out[1], _CHANNELS[2:]),
                                            _divisors(cin, _CHANNELS)):
            space.append(Candidate("alt_tiled", (("tiles", ts), ("ot", ot), ("it", it))))
    elif node.type == "matmul":
        for m, n in itertools.product(_divisors(out[-2], _GMM), _divisors(out[-1], _GMM)):
            space.append(Candidate("nkn", (("m", m), ("n", n))))
    elif node.type == "expr_complex":  # a contraction in index notation: no op-specific template
        for d, n in enumerate(out[:-1]):  # the last dim is innermost already
            space += [Candidate("blocked", (("dim", d), ("factor", f))) for f in _divisors(n, _CHANNELS[2:]) if f > 1]
    else:
        raise TuneError(f"{op} ({node.label}) is not a complex op: its layout comes by propagation")
    return space


@dataclass
class JointResult:
    op: str
    best: Candidate
    best_ms: float
    trace: Any
    scores: list[tuple[Candidate, float | None]] = field(default_factory=list)
    measurements: int = 0
    #: the unscheduled kernel ``best_ms`` was measured on (the trace's kernel)
    func: Any = None

    def step(self, twin: str | None = None, blocks: Mapping[str, str] | None = None) -> Step:
        """The session step that applies this result: the chosen layout, then the tuned trace;
        with ``twin``, to that op instead (one whose kernel equals this op's: it shares the
        result, with no measurement of its own), the trace's block names renamed by ``blocks``
        (this op's kernel's names -> the twin's)."""
        op = twin or self.op
        layout = self.best.step(op)
        return Step.make("tuned", op, "tuned", stage="joint+loop" if twin is None else f"joint+loop (from {self.op})",
                         layouts=[layout.to_json()] if layout else [], trace=renamed_trace(self.trace, blocks or {}),
                         latency_ms=self.best_ms, measurements=self.measurements if twin is None else 0)


def _distance(a: Candidate, b: Candidate) -> float:
    """L1 distance of the log2 template parameters: 1.0 = one parameter doubled or halved."""
    fa, fb = a.features(), b.features()
    width = max(len(fa), len(fb))
    return sum(abs(x - y) for x, y in zip(fa + [0.0] * (width - len(fa)), fb + [0.0] * (width - len(fb))))


def prior(c: Candidate, lanes: int) -> float:
    """A static estimate of how good a layout is before any measurement (lower is better): the
    innermost stored dim (output channels ``ot``) should fill whole vector registers of ``lanes``
    floats, and one output tile should hold 1-16 KiB (reused from L1 while the reduction runs,
    yet not so small that loop overhead dominates); GMM's ``n`` is best three vectors wide, then
    two: the expert's register tile is then rows x 3 vectors, 12 accumulators on AVX2 and fewer
    loads per FMA than rows x 2 (BERT's matmuls ran 5-10% faster at n = 24 than 16 on znver3, and
    n = 64 ran 2x slower), with ``m`` 8-16 rows. Learned on by the cost model too.

    >>> [prior(Candidate("nkn", (("m", m), ("n", n))), 8) for m, n in ((8, 24), (16, 16), (8, 8), (4, 24), (8, 64))]
    [0.0, 0.1, 0.25, 0.2, 1.0]
    """
    if c.preset is None:
        return 1.5
    kw = c.kwargs
    if "n" in kw:  # GMM: B in panels one register tile wide (BLIS's nr), A in blocks of a few rows
        n, m = kw["n"], kw["m"]
        return ({3 * lanes: 0.0, 2 * lanes: 0.1, lanes: 0.25}.get(n, 0.5 if n % lanes == 0 and n <= 4 * lanes else 1.0)
                + (0.0 if 8 <= m <= 16 else 0.2 if m == 4 else 0.5))
    inner = kw.get("ot", kw.get("n", lanes))
    tile = math.prod(kw.get("tiles", [kw.get("m", 1)])) * inner
    score = (0.0 if inner % lanes == 0 else 1.0) + (0.5 if inner < lanes // 2 else 0.0)
    score += abs(math.log2(tile / 1024)) / 4 if not 256 <= tile <= 4096 else 0.0
    if kw.get("tiles") and kw["tiles"][-1] < 4:  # a narrow innermost spatial tile: short vectors
        score += 0.5
    if kw.get("it", lanes) < 4:  # input channels one or two at a time: little reuse per load
        score += 0.25
    return score


def _cost_model(scored: dict[Candidate, float], lanes: int) -> Callable[[list[Candidate]], np.ndarray]:
    """XGBoost on the template features and the prior, trained on log latency of the candidates
    scored so far (its native API: the scikit-learn wrapper would need scikit-learn)."""
    import xgboost as xgb

    feats = lambda c: c.features() + [prior(c, lanes)]  # noqa: E731
    finite = [v for v in scored.values() if v < math.inf]
    xs = [feats(c) for c in scored]
    width = max(len(x) for x in xs)
    pad = lambda v: v[:-1] + [0.0] * (width - len(v)) + v[-1:]  # noqa: E731 - the prior stays last
    ys = [math.log(v) if v < math.inf else math.log(max(finite)) + 1.0 for v in scored.values()]
    booster = xgb.train({"max_depth": 3, "eta": 0.3, "verbosity": 0, "nthread": 1},
                        xgb.DMatrix(np.array([pad(x) for x in xs]), label=np.array(ys)), num_boost_round=60)
    return lambda cands: booster.predict(xgb.DMatrix(np.array([pad(feats(c)) for c in cands])))


def _pick(space: list[Candidate], scored: dict[Candidate, float], rng: random.Random, search: str, lanes: int,
          explore: int = 3, neighbourhood: int = 24) -> Candidate:
    """The next candidate to score.

    ``random``: uniform over the unscored ones. ``model``: first the ``explore`` candidates the
    static ``prior`` rates best (ties broken at random, so seeds differ), then a local search
    guided by the cost model: among the unscored candidates nearest (in template parameters) to
    the two best scored so far, the one the model predicts fastest, the prior breaking ties; one
    pick in ten stays random. Why local: with a handful of noisy scores, a model's argmin over
    the whole space lands on extremes it never saw; near good layouts its ranking is worth more."""
    left = [c for c in space if c not in scored]
    finite = sorted((v, i) for i, v in enumerate(scored.values()) if v < math.inf)
    if search == "random" or rng.random() < 0.1:
        return rng.choice(left)
    if len(scored) < explore or len(finite) < 2:
        return min(left, key=lambda c: prior(c, lanes) + 0.3 * rng.random())
    keys = list(scored)
    best = [keys[i] for _, i in finite[:2]]
    near = sorted(left, key=lambda c: (min(_distance(c, b) for b in best), rng.random()))[:neighbourhood]
    pred = _cost_model(scored, lanes)(near)
    return min(zip(pred, near), key=lambda pc: (round(float(pc[0]), 3), prior(pc[1], lanes)))[1]


def _per_candidate(budget: int, options: TuneOptions) -> int:
    return max(1, min(options.per_candidate, budget - 1))  # never more than the budget in all


def candidates_scored(budget: int, options: TuneOptions, space: int) -> int:
    """How many of ``space`` layout candidates a joint tuning of ``budget`` measurements scores
    (its ``joint_fraction`` share, ``per_candidate`` measurements each), the rest of the budget
    going to the loop-only stage. A budget that would score the default layout alone scores the
    prior's best layout too when it can, and then has no loop-only stage: in a network, most
    ops get two or three measurements, and a layout that gives a stride-2 conv a gather-free
    vector loop is worth more than one search step from the expert schedule.

    >>> [candidates_scored(b, TuneOptions(), 40) for b in (64, 5, 2, 1)], candidates_scored(2, TuneOptions(), 1)
    ([19, 2, 2, 1], 1)
    """
    per_candidate = _per_candidate(budget, options)
    joint_budget = min(budget - 1, max(per_candidate, int(round(budget * options.joint_fraction))))
    scored = max(1, min(space, joint_budget // per_candidate))
    return 2 if scored == 1 and space > 1 and budget >= 2 * per_candidate else scored


def joint_tune(graph: Graph, book: LayoutBook, op: str, target: dict, work_dir: Path, budget: int,
               options: TuneOptions = TuneOptions(), *,
               on_candidate: Callable[[Candidate, float | None], None] | None = None,
               measurers: Measurers | None = None) -> JointResult:
    """Joint stage then loop-only stage for ``op``; ``budget`` counts hardware measurements.

    The joint stage takes ``options.joint_fraction`` of the budget and scores each candidate by
    ``options.per_candidate`` measurements. Candidates are measured in this process unless
    ``options.isolated`` (see ``tune_loops``): the joint stage starts many short tunings, and
    TVM's worker pools cost seconds each (``measurers`` keeps them between tunings; by default
    they are made for this call)."""
    if budget < 2:
        raise TuneError(f"budget {budget} is too small for a joint and a loop stage")
    if measurers is None:
        with Measurers() as own:
            return joint_tune(graph, book, op, target, work_dir, budget, options, on_candidate=on_candidate,
                              measurers=own)
    work_dir = Path(work_dir)
    rng = random.Random(options.seed)
    lanes = vector_unit(target).lanes
    space = layout_space(graph, op, lanes)
    per_candidate = _per_candidate(budget, options)
    n_cand = candidates_scored(budget, options, len(space))
    scored: dict[Candidate, float] = {}
    results: dict[Candidate, Any] = {}
    used = 0
    costs = ConversionCosts(target, measurers.conversions if options.rpc is None else None)
    base_cost = None
    for k in range(n_cand):
        cand = space[0] if k == 0 else _pick(space, scored, rng, options.search, lanes)
        try:
            task, prog = _task(graph, book, op, cand)
        except WorkbenchError:
            scored[cand] = math.inf  # a template that does not fit this op: skip it
            continue
        res = tune_loops([task], target, work_dir / f"cand{k}", per_candidate,
                         replace(options, seed=options.seed_plus(k)), stage="joint", layout_label=cand.label,
                         measurers=measurers)[op]
        used += res.measurements
        if res.best_ms is None:
            scored[cand] = math.inf
        else:  # the conversions this layout adds to the graph's are paid by it
            cost = costs.total_ms(prog)
            base_cost = cost if base_cost is None else base_cost
            scored[cand] = res.best_ms + max(0.0, cost - base_cost)
        results[cand] = (res, work_dir / f"cand{k}", task)
        if on_candidate:
            on_candidate(cand, res.best_ms)
    if not results or min(scored.values()) == math.inf:
        raise TuneError(f"no layout candidate of {op} built and ran")
    best = min(results, key=lambda c: scored[c])
    res, wd, task = results[best]
    left = budget - used
    if left > 0:  # loop-only stage on the chosen layout, resuming from its records
        res = tune_loops([task], target, wd, res.measurements + left,
                         replace(options, seed=options.seed_plus(1000)), stage="loop", layout_label=best.label,
                         measurers=measurers)[op]
        used = used - results[best][0].measurements + res.measurements
    return JointResult(op, best, res.best_ms, res.trace, [(c, scored[c]) for c in scored], used, task.func)


def _task(graph: Graph, book: LayoutBook, op: str, cand: Candidate) -> tuple[TuneTask, Program]:
    """The op's kernel under ``cand``, and the whole program (for its conversions)."""
    prog = make_program(graph, apply_actions(graph, book, cand.actions(graph, op)))
    if op not in prog.funcs:
        raise TuneError(f"no kernel {op} under layout {cand.label}")
    return TuneTask(op, prog.funcs[op], prog.flops[op]), prog


class ConversionCosts:
    """What a program's stand-alone conversion kernels cost, in ms. Each distinct kernel (by
    structural hash) is built with its analytic schedule and timed once in this process and
    remembered in ``cache`` (a whole network's other conversions stay the same from candidate to
    candidate); with ``cache=None`` (candidates timed on RPC servers, not here) the bytes they
    move are costed at this machine's copy bandwidth instead."""

    def __init__(self, target: Mapping, cache: dict[int, float] | None) -> None:
        self.target, self.cache = target, cache

    def total_ms(self, prog: Program) -> float:
        kernels = [k.name for k in prog.plan.kernels if k.conversion is not None]
        if self.cache is None:
            return sum(conversion_bytes(prog, k) for k in kernels) / (copy_bandwidth(self.target) * 1e6)
        return sum(self._ms(prog.funcs[k], k) for k in kernels)

    def _ms(self, func: Any, kernel: str) -> float:
        key = int(tvm_ffi.structural_hash(func))
        if key not in self.cache:
            # 50 ms of timing: conversions run for microseconds to milliseconds
            self.cache[key] = conversion_ms(func, self.target, kernel=kernel, min_s=0.05)[0]
        return self.cache[key]
