"""Session-level auto-tuning: the joint layout+loop stage over every complex op, or the
loop-only stage over every kernel with the layouts frozen. Results are appended to the
session as ``tuned`` steps, so ``replay`` rebuilds the tuned kernels with no tuning.

Progress goes to ``options.progress_path`` (one JSON line per measurement, see ``progress``); the
app and the CLI read it. Each stage keeps its MetaSchedule databases under ``work_dir``, so a
run that was stopped loses no completed measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import TuneError, WorkbenchError
from ..loops import list_blocks
from ..session import Session, State, replay
from ..step import Step
from ..targets import vector_unit
from .joint import Candidate, JointResult, candidates_scored, joint_tune, layout_space
from .loop import tune_loops
from .options import TuneOptions, budget_shares
from .records import TuneTask
from .runner import Measurers

__all__ = ["STAGES", "JointShare", "twin_groups", "joint_shares", "tune_session"]

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
    import tvm_ffi

    graph, prog = state.graph, state.program
    groups: list[tuple[object, list[str]]] = []  # (the first op's kernel, the ops)
    for k in prog.plan.kernels:
        if not (k.ops and graph.node(k.head).kind == "complex"):
            continue
        func = prog.funcs[k.name].with_attr("global_symbol", "k")  # the kernel's own name does not count
        same = next((ops for first, ops in groups if tvm_ffi.structural_equal(first, func)), None)
        if same is None:
            groups.append((func, [k.head]))
        else:
            same.append(k.head)
    return [ops for _, ops in groups]


def joint_shares(state: State, budget: int, options: TuneOptions = TuneOptions()) -> list[JointShare]:
    """How a joint tuning of ``budget`` measurements splits over the state's complex ops: ops
    with equal kernels are tuned once (``twin_groups``), and each group gets a share in
    proportion to its FLOPs (all its ops'), at least two (a joint and a loop-only measurement).

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
    shares = budget_shares([float(sum(graph.flops(op) for op in g)) for g in groups], budget, minimum=2)
    out = []
    for (op, *twins), share in zip(groups, shares):
        space = len(layout_space(graph, op, lanes))
        out.append(JointShare(op, share, candidates_scored(share, options, space), space, tuple(twins)))
    return out


def _take_twin(state: State, res: JointResult, twin: str) -> State:
    """``twin`` with the result of the op it equals; when the layouts chosen so far changed its
    kernel so that the trace no longer applies, the same layout on its expert schedule."""
    # the kernels are equal but their blocks are named after their own ops: the trace finds its
    # blocks by name, so rename them (both kernels as they are now, under the layouts chosen)
    mine, theirs = (list_blocks(state.program.funcs[state.home_kernel(op)]) for op in (res.op, twin))
    try:
        return state.push(res.step(twin, dict(zip(mine, theirs)) if len(mine) == len(theirs) else {}))
    except WorkbenchError:
        pass
    try:
        step = res.best.step(twin)
        laid = state.push(step) if step else state
        return laid.with_expert_schedule(laid.home_kernel(twin))
    except WorkbenchError:  # left on its current layout and schedule: the session stays valid
        return state


def tune_session(session: Session, stage: str, budget: int, work_dir: Path, options: TuneOptions = TuneOptions(),
                 *, on_candidate: Callable[[str, Candidate, float | None], None] | None = None) -> Session:
    """Tune and return the session with the results applied as ``tuned`` steps.

    ``joint``: complex ops with equal kernels are tuned once (``joint_shares``), each group
    getting a share of ``budget`` in proportion to its FLOPs (at least two: a joint and a
    loop-only measurement) and a joint stage, in order, each on the layouts the ones before
    chose; the group's other ops take its result; ``on_candidate(op, candidate, best_ms)`` hears of every layout
    candidate scored. ``loop``: one loop-only stage over every kernel."""
    if stage not in STAGES:
        raise TuneError(f"stage must be one of {STAGES}, got {stage!r}")
    if budget < 1:
        raise TuneError(f"budget must be a positive number of measurements, got {budget}")
    work_dir = Path(work_dir)
    state = replay(session)
    prog = state.program
    with Measurers() as measurers:
        if stage == "joint":
            for share in joint_shares(state, budget, options):
                op = share.op
                hear = (lambda c, s, op=op: on_candidate(op, c, s)) if on_candidate else None
                res = joint_tune(state.graph, state.book, op, session.target, work_dir / "joint" / op, share.budget,
                                 options, on_candidate=hear, measurers=measurers)
                state = state.push(res.step())
                for twin in share.twins:
                    state = _take_twin(state, res, twin)
            return state.session
        tasks = [TuneTask(k.name, prog.funcs[k.name], max(prog.flops.get(k.name, 0), 1)) for k in prog.plan.kernels]
        results = tune_loops(tasks, session.target, work_dir / "loop", budget, options, stage="loop",
                             measurers=measurers)
    for name, r in results.items():
        if r.best_ms is not None:
            state = state.push(Step.make("tuned", name, "tuned", stage="loop", trace=r.trace, latency_ms=r.best_ms,
                                         measurements=r.measurements))
    return state.session
