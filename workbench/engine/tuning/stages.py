"""Session-level auto-tuning: the joint layout+loop stage over every complex op, or the
loop-only stage over every kernel with the layouts frozen. Results are appended to the
session as ``tuned`` steps, so ``replay`` rebuilds the tuned kernels with no tuning.

Progress goes to ``options.progress_path`` (one JSON line per measurement, see ``progress``); the
app and the CLI read it. Each stage keeps its MetaSchedule databases under ``work_dir``, so a
run that was stopped loses no completed measurement.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..agreement import disagreement
from ..errors import TuneError, TuneWarning, WorkbenchError
from ..expert.simple import simple_steps
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


def _disagreement(state: State, kernel: str) -> str | None:
    """How the kernel's schedule changes its results (``agreement``), None when it does not."""
    if state.schedule(kernel).kind == "default":
        return None
    k = next(k for k in state.program.plan.kernels if k.name == kernel)
    return disagreement(state.program.funcs[kernel], state.scheduled(kernel), len(k.outputs), state.session.target)


def _first_correct(state: State, op: str, tries: Sequence[tuple[str, Callable[[State], State]]]) -> State:
    """The first of ``tries`` (what it is, how to apply it) that TVM accepts and after which the
    kernel ``op`` (or the one holding op ``op``) computes what its unscheduled kernel does; ``state`` when none does.
    A wrong one is skipped with a warning: MetaSchedule measures candidates without checking
    their output, and a kernel that forgets part of it looks fast."""
    for what, attempt in tries:
        try:
            new = attempt(state)
        except WorkbenchError:
            continue
        kernel = op if op in new.program.funcs else new.home_kernel(op)
        if (why := _disagreement(new, kernel)) is None:
            return new
        warnings.warn(f"kernel {kernel}: the {what} gives wrong results ({why}); not used", TuneWarning, stacklevel=2)
    return state


def _expert(op: str, candidate: Candidate | None = None) -> Callable[[State], State]:
    """Apply ``candidate``'s layout (if any), then the expert schedule of ``op``'s kernel."""
    def attempt(state: State) -> State:
        step = candidate.step(op) if candidate else None
        laid = state.push(step) if step else state
        return laid.with_expert_schedule(laid.home_kernel(op))
    return attempt


def _layout_only(op: str, candidate: Candidate) -> Callable[[State], State]:
    return lambda state: state.push(step) if (step := candidate.step(op)) else state


def _take_result(state: State, res: JointResult) -> State:
    """The joint stage's result for its op: its tuned step, else (wrong results) its layout on
    the expert schedule, else its layout alone."""
    return _first_correct(state, res.op, [("tuned schedule", lambda s: s.push(res.step())),
                                          ("expert schedule", _expert(res.op, res.best)),
                                          ("default schedule", _layout_only(res.op, res.best))])


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

    return _first_correct(state, twin, [("tuned schedule", tuned),
                                        ("expert schedule", _expert(twin, res.best)),
                                        ("default schedule", _layout_only(twin, res.best))])


def _rescheduled(state: State, tuned: Mapping[str, Step]) -> State:
    """Kernels that lost their schedule when a later op's layout changed them (their epilogue
    now writes that op's layout): their own tuned trace again where it still applies, else their
    expert schedule. Never left unscheduled, which in a network is 50-100x slower; the simple
    kernels (a pool, an element-wise op that writes a conv's tiles) take their analytic schedule
    (``expert.simple``)."""
    for k in state.program.plan.kernels:
        if state.schedule(k.name).kind != "default" or not k.ops:
            continue
        if state.graph.node(k.head).kind != "complex":  # several blocks (softmax...): TVM's defaults
            state = _first_correct(state, k.head, [("analytic schedule", _simple(k.name))])
            continue
        tries = [("expert schedule", _expert(k.head))]
        if (step := tuned.get(k.head)) is not None:
            again = Step.make("tuned", k.name, "tuned", stage=f"{step.get('stage')} (re-applied)",
                              trace=step.get("trace"), measurements=0)
            tries.insert(0, ("tuned schedule, re-applied", lambda s, again=again: s.push(again)))
        state = _first_correct(state, k.head, tries)  # else left unscheduled: the session stays valid
    return state


def _simple(kernel: str) -> Callable[[State], State]:
    def attempt(state: State) -> State:
        for step in simple_steps(state.program.funcs[kernel], kernel, state.session.target):
            state = state.push(step)
        return state
    return attempt


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
    tuned: dict[str, Step] = {}
    with Measurers() as measurers:
        if stage == "joint":
            for share in joint_shares(state, budget, options):
                op = share.op
                hear = (lambda c, s, op=op: on_candidate(op, c, s)) if on_candidate else None
                res = joint_tune(state.graph, state.book, op, session.target, work_dir / "joint" / op, share.budget,
                                 options, on_candidate=hear, measurers=measurers)
                state = _take_result(state, res)
                tuned[op] = res.step()
                for twin in share.twins:
                    state = _take_twin(state, res, twin)
            return _rescheduled(state, tuned).session
        tasks = [TuneTask(k.name, prog.funcs[k.name], max(prog.flops.get(k.name, 0), 1)) for k in prog.plan.kernels]
        results = tune_loops(tasks, session.target, work_dir / "loop", budget, options, stage="loop",
                             measurers=measurers)
    for name, r in results.items():
        if r.best_ms is not None:
            step = Step.make("tuned", name, "tuned", stage="loop", trace=r.trace, latency_ms=r.best_ms,
                             measurements=r.measurements)
            state = _first_correct(state, name, [("tuned schedule", lambda s, step=step: s.push(step))])
    return state.session
