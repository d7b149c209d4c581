"""Session-level auto-tuning: the joint layout+loop stage over every complex op, or the
loop-only stage over every kernel with the layouts frozen. Results are appended to the
session as ``tuned`` steps, so ``replay`` rebuilds the tuned kernels with no tuning.

Progress goes to ``options.progress_path`` (one JSON line per measurement, see ``progress``); the
app and the CLI read it. Each stage keeps its MetaSchedule databases under ``work_dir``, so a
run that was stopped loses no completed measurement.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..base.errors import TuneError, TuneWarning
from ..base.interleave import call_timer, remeasure
from ..loops.primitives import list_blocks
from ..session.session import Session, State, replay
from ..build.targets import vector_unit
from .apply import complex_kernels, equal_groups, expert_attempt, first_correct, layout_attempt
from .check import KernelCheck, check_state, kernel_times, slow_kernels
from .jobs.partial import loop_results_applied
from .joint import Candidate, JointResult, candidates_scored, joint_tune, layout_space
from .loop import tune_loops
from .options import TuneOptions, budget_shares, loss_weights
from .records import TuneTask
from .runner import Measurers
from .settle import schedule_the_rest, settle

__all__ = ["STAGES", "JointShare", "NetworkTuning", "twin_groups", "joint_shares", "seed_times", "tune_session",
           "tune_network", "time_states", "summary_of"]

STAGES = ("joint", "loop")


@dataclass(frozen=True)
class JointShare:
    """One complex op's part of a joint tuning: its ``budget`` (measurements), the layout
    candidates its joint stage can score and how many its layout space holds (on the layouts
    the session has now; ops tuned earlier in the run may change the later ones' spaces)."""

    op: str
    budget: int
    candidates: int
    space: int
    #: ops whose kernels equal this op's (same computation, shapes and fused epilogue): they take
    #: its result instead of a tuning of their own
    twins: tuple[str, ...] = ()


def twin_groups(state: State) -> list[list[str]]:
    """The state's complex ops (in kernel order) grouped by kernel: ops whose unscheduled
    kernels are structurally equal (ResNet-18's repeated blocks) form one group, first op first."""
    heads = {k.name: k.head for k in state.program.plan.kernels}
    return [[heads[k] for k in group] for group in equal_groups(state, complex_kernels(state))]


def joint_shares(state: State, budget: int, options: TuneOptions = TuneOptions(),
                 kernel_ms: Mapping[str, float] | None = None) -> list[JointShare]:
    """How a joint tuning of ``budget`` measurements splits over the state's complex ops: ops
    with equal kernels are tuned once (``twin_groups``), and each group gets a share in
    proportion to its weight (all its ops'), at least two (a joint and a loop-only measurement).
    The weight is the time its kernels lose (``options.loss_weights``) where ``kernel_ms`` (kernel
    -> measured ms, e.g. ``seed_times``) times them all and ``options.split`` is ``loss``, else
    their FLOPs. With several groups, ``options.settle_fraction`` of the budget is kept for ``settle``.

    Raises
    ------
    TuneError
        No complex op, or a budget under two per group.
    """
    graph = state.graph
    groups = twin_groups(state)
    if not groups:
        raise TuneError(f"{graph.name} has no complex op to tune layouts for")
    if budget < 2 * len(groups):
        ops = [g[0] for g in groups]
        raise TuneError(f"a joint budget of {budget} measurements is too small for {len(ops)} complex ops "
                        f"({', '.join(ops)}): give at least {2 * len(ops)} (two each)")
    lanes = vector_unit(state.session.target).lanes
    if len(groups) > 1 and budget - (reserve := int(budget * options.settle_fraction)) >= 2 * len(groups):
        budget -= reserve  # kept to tune again the kernels a later group's layout changes (``settle``)
    shares = budget_shares(_group_weights(state, groups, options, kernel_ms), budget, minimum=2)
    out = []
    for (op, *twins), share in zip(groups, shares):
        space = len(layout_space(graph, op, lanes))
        out.append(JointShare(op, share, candidates_scored(share, options, space), space, tuple(twins)))
    return out


def _group_weights(state: State, groups: list[list[str]], options: TuneOptions,
                   kernel_ms: Mapping[str, float] | None) -> list[float]:
    """Each group's weight: the loss of its ops' kernels, or (no time for one of them) its FLOPs."""
    kernels = [[state.home_kernel(op) for op in g] for g in groups]
    flat = [k for ks in kernels for k in ks]
    if options.split == "loss" and kernel_ms and all(kernel_ms.get(k, 0) > 0 for k in flat):
        flops = state.program.flops
        loss = dict(zip(flat, loss_weights([float(flops.get(k, 0)) for k in flat], [kernel_ms[k] for k in flat])))
        # in ns: ``budget_shares`` counts a weight under 1 as 1
        return [1e6 * sum(loss[k] for k in ks) for ks in kernels]
    return [float(sum(state.graph.flops(op) for op in g)) for g in groups]


def seed_times(state: State) -> dict[str, float]:
    """Each kernel's ms in the state's network with every complex kernel on its expert schedule
    (the joint stage's seeds), timed alone on the network's buffers: where the network loses time
    before tuning."""
    return kernel_times(_expert_network(state))


def _take_result(state: State, res: JointResult) -> State:
    """The joint stage's result for its op, in the policy's order: its tuned step, else (wrong
    results) its layout on the expert schedule, else its layout alone."""
    return first_correct(state, res.op, {"tuned": lambda s: s.push(res.step()),
                                         "expert": expert_attempt(res.op, res.best),
                                         "default": layout_attempt(res.op, res.best)})


def _take_twin(state: State, res: JointResult, twin: str) -> State:
    """``twin`` with the result of the op it equals; when the layouts chosen so far changed its
    kernel so that the trace no longer applies, the same layout on its expert schedule."""
    def tuned(s: State) -> State:
        # the kernels are equal but their blocks are named after their own ops: the trace finds
        # its blocks by name, so rename them, both kernels under the chosen layout (the twin's
        # still in its old layout had other blocks: the trace then failed whenever a tiled
        # layout won, and the twin fell back to the expert schedule)
        laid = s.push(step) if (step := res.best.step(twin)) else s
        mine, theirs = (list_blocks(laid.program.funcs[laid.home_kernel(op)]) for op in (res.op, twin))
        return s.push(res.step(twin, dict(zip(mine, theirs)) if len(mine) == len(theirs) else {}))

    return first_correct(state, twin, {"tuned": tuned, "expert": expert_attempt(twin, res.best),
                                       "default": layout_attempt(twin, res.best)})


@dataclass(frozen=True)
class NetworkTuning:
    """What ``tune_network`` gives: the tuned session (the kept network's), which network was kept
    (``tuned``, ``expert``, ``start`` or a seed's label) and each compared network's median ms, the
    kernels settled after the joint stage, and the check of each tuned kernel against its tuning.
    ``start`` and ``state`` are the starting and the kept states, so that what follows the tuning
    (a job timing its baselines) replays neither session again."""

    session: Session
    kept: str = "tuned"
    network_ms: Mapping[str, float] = field(default_factory=dict)
    settled: tuple[str, ...] = ()
    checks: tuple[KernelCheck, ...] = ()
    start: State | None = field(default=None, repr=False, compare=False)
    state: State | None = field(default=None, repr=False, compare=False)

    def slow(self) -> list[KernelCheck]:
        return slow_kernels(list(self.checks))

    def summary(self) -> list[str]:
        return summary_of(self.to_json())

    def to_json(self) -> dict:
        return {"kept": self.kept, "network_ms": dict(self.network_ms), "settled": list(self.settled),
                "checks": [c.to_json() for c in self.checks]}


def summary_of(report: Mapping) -> list[str]:
    """What a user should know of a ``NetworkTuning`` (as ``to_json`` gives it) beyond the tuned
    figures, one line each: kernels tuned again, the network kept, kernels slower than measured."""
    lines = []
    if report.get("settled"):
        lines.append(f"tuned again in their final form (a later layout changed them): {', '.join(report['settled'])}")
    if times := report.get("network_ms"):
        lines.append("whole network, ms: " + ", ".join(f"{k} {v:.4g}" for k, v in times.items())
                     + f"; kept: {report.get('kept', 'tuned')}")
    checks = [KernelCheck.from_json(c) for c in report.get("checks", ())]
    lines += [f"warning: {c.text()}" for c in slow_kernels(checks)]
    if checks and not slow_kernels(checks):
        worst = max(checks, key=lambda c: c.ratio)
        lines.append(f"every tuned kernel runs within {worst.ratio:.2f}x of its tuning's figure in the network")
    return lines


def tune_session(session: Session, stage: str, budget: int, work_dir: Path, options: TuneOptions = TuneOptions(),
                 *, on_candidate: Callable[[str, Candidate, float | None], None] | None = None) -> Session:
    """``tune_network``'s session."""
    return tune_network(session, stage, budget, work_dir, options, on_candidate=on_candidate).session


def tune_network(session: Session, stage: str, budget: int, work_dir: Path, options: TuneOptions = TuneOptions(),
                 *, on_candidate: Callable[[str, Candidate, float | None], None] | None = None,
                 seeds: Mapping[str, Session] | None = None,
                 time_networks: Callable[[Mapping[str, State]], Mapping[str, float]] | None = None) -> NetworkTuning:
    """Tune the session and return it with the results applied as ``tuned`` steps.

    ``joint``: complex ops with equal kernels are tuned once (``joint_shares``), each group
    getting a share of the budget in proportion to its FLOPs, or with ``options.split="loss"`` to
    the time its kernels lose on their expert schedules (``seed_times``; at least two: a joint and a
    loop-only measurement) and a joint stage, in order, each on the layouts the ones before
    chose; the group's other ops take its result; ``on_candidate(op, candidate, best_ms)`` hears of
    every layout candidate scored. Kernels that later layouts changed are then tuned again in their
    final form (``settle``, with ``options.settle_fraction`` of the budget kept for it).
    ``loop``: one loop-only stage over every kernel.

    With ``options.keep_faster``, a joint tuning's network is timed against its seeds (every kernel on its
    expert schedule; ``seeds``, e.g. a smaller budget's result) and its starting point where that
    is fully scheduled, interleaved (``time_networks``), and the fastest is kept: more budget never
    returns a slower network than these. Each tuned kernel of the kept network is then timed
    against its tuning (``check``); one over ``check.SLOWER`` x is warned of by name."""
    if stage not in STAGES:
        raise TuneError(f"stage must be one of {STAGES}, got {stage!r}")
    if budget < 1:
        raise TuneError(f"budget must be a positive number of measurements, got {budget}")
    work_dir = Path(work_dir)
    start = replay(session)
    with Measurers() as measurers:
        if stage == "joint":
            state, settled = _joint(start, budget, work_dir, options, measurers, on_candidate)
        else:
            state, settled = _loop(start, budget, work_dir, options, measurers), []
    state = schedule_the_rest(state)
    kept, times = "tuned", {}
    if options.keep_faster and stage == "joint":  # the loop stage's kernels already include their expert seeds
        contenders = {"tuned": state, "expert": _expert_network(start),
                      **{label: replay(s) for label, s in (seeds or {}).items()}}
        if not any(start.kernel_schedule(k).kind == "default" for k in start.program.funcs):
            contenders["start"] = start
        times = dict((time_networks or time_states)(contenders))
        kept = min(times, key=lambda k: times[k] * (1.0 if k == "tuned" else _MARGIN))
        state = contenders[kept]
        if kept != "tuned":
            warnings.warn(f"the tuned network ({times['tuned']:.4g} ms) was slower than the {kept} network "
                          f"({times[kept]:.4g} ms): the {kept} one is kept", TuneWarning, stacklevel=2)
    checks = check_state(state)
    for c in slow_kernels(checks):
        warnings.warn(c.text(), TuneWarning, stacklevel=2)
    return NetworkTuning(state.session, kept, times, tuple(settled), tuple(checks), start=start, state=state)


def _expert_network(state: State) -> State:
    """Every complex kernel without a schedule on its expert schedule (the tuning's seeds), the
    others on their analytic ones."""
    heads = {k.name: k.head for k in state.program.plan.kernels}
    for k in complex_kernels(state):
        if state.kernel_schedule(k).kind == "default":
            state = first_correct(state, k, {"expert": expert_attempt(heads[k])})
    return schedule_the_rest(state)


#: another network replaces the tuned one only when it is faster by more than timing noise
_MARGIN = 1.1


def _joint(state: State, budget: int, work_dir: Path, options: TuneOptions, measurers: Measurers,
           on_candidate: Callable[[str, Candidate, float | None], None] | None) -> tuple[State, list[str]]:
    """The joint stage op group by op group, then ``settle`` with the budget left."""
    shares = joint_shares(state, budget, options, seed_times(state) if options.split == "loss" else None)
    measured: dict[str, Any] = {}  # kernel -> the unscheduled kernel its tuned step was measured on
    used = 0
    for share in shares:
        op = share.op
        hear = (lambda c, s, op=op: on_candidate(op, c, s)) if on_candidate else None
        res = joint_tune(state.graph, state.book, op, state.session.target, work_dir / "joint" / op, share.budget,
                         options, on_candidate=hear, measurers=measurers)
        used += res.measurements
        state = _take_result(state, res)
        for twin in share.twins:
            state = _take_twin(state, res, twin)
        for member in (op, *share.twins):
            if state.kernel_schedule(kernel := state.home_kernel(member)).kind == "tuned":
                measured[kernel] = res.func
    traces = {s.target: s.get("trace") for s in state.session.steps if s.kind == "tuned"}
    return settle(state, measured, traces, work_dir / "settle", max(1, budget - used), options, measurers)


def _loop(state: State, budget: int, work_dir: Path, options: TuneOptions, measurers: Measurers) -> State:
    prog = state.program
    tasks = [TuneTask(k.name, prog.funcs[k.name], max(prog.flops.get(k.name, 0), 1)) for k in prog.plan.kernels]
    results = tune_loops(tasks, state.session.target, work_dir / "loop", budget, options, stage="loop",
                         measurers=measurers)
    return loop_results_applied(state, results)


def time_states(states: Mapping[str, State], rounds: int = 5) -> dict[str, float]:
    """Each state's whole network built and timed end to end, interleaved (median ms)."""
    timers = {}
    for label, st in states.items():
        built = st.scheduled_program().build(st.session.target)
        timers[label] = call_timer(built.runner(st.graph.random_inputs(0)))
    return {label: r.median_ms for label, r in remeasure(timers, rounds).items()}
