"""After the joint stage, the network's kernels as they finally are.

The joint stage tunes one op at a time, each on the layouts the ones before chose. A later op's
layout can change a kernel tuned earlier (its epilogue then writes that op's layout): the kernel's
tuned trace no longer describes it, and nothing measured it. Such kernels are *settled*: tuned
again, loop-only, in their final form (kernels that are equal once, the result shared), seeded
by their expert schedule and by their old trace where it still applies. So every kernel of the
tuned network runs a schedule that was measured on that very kernel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..loops.primitives import list_blocks
from ..session.session import State
from ..base.step import Step
from .apply import complex_kernels, equal_groups, expert_attempt, first_correct, same_kernel
from .loop import tune_loops
from .options import TuneOptions
from .records import TuneTask, renamed_trace
from .runner import Measurers

__all__ = ["SETTLE_STAGE", "unsettled", "settle", "schedule_the_rest"]

#: the ``stage`` of a settled kernel's tuned step
SETTLE_STAGE = "loop (kernel changed after its tuning)"


def unsettled(state: State, measured: Mapping[str, Any]) -> list[str]:
    """The complex kernels that do not run a tuned schedule measured on their present form
    (``measured``: kernel -> the unscheduled kernel its tuned step was measured on)."""
    return [k for k in complex_kernels(state)
            if not (state.kernel_schedule(k).kind == "tuned" and k in measured
                    and same_kernel(state.program.funcs[k], measured[k]))]


def settle(state: State, measured: Mapping[str, Any], traces: Mapping[str, Any], work_dir: Path, budget: int,
           options: TuneOptions, measurers: Measurers | None = None) -> tuple[State, list[str]]:
    """Tune the ``unsettled`` kernels again in their present form, within ``budget``
    measurements (at least one per group of equal kernels); ``traces``: each kernel's old trace,
    a seed. Returns the state and the kernels settled (a kernel whose tuning fails or gives wrong
    results takes its expert schedule instead)."""
    todo = unsettled(state, measured)
    if not todo:
        return state, []
    groups = equal_groups(state, todo)
    prog = state.program
    tasks = [TuneTask(g[0], prog.funcs[g[0]], max(sum(prog.flops.get(k, 0) for k in g), 1),
                      seeds=tuple(t for t in [traces.get(g[0])] if t is not None)) for g in groups]
    results = tune_loops(tasks, state.session.target, work_dir, max(budget, len(tasks)), options, stage="settle",
                         measurers=measurers)
    for group in groups:
        res = results[group[0]]
        first_blocks = list_blocks(prog.funcs[group[0]])
        for k in group:
            tries = {"expert": expert_attempt(k)}
            if res.best_ms is not None:
                blocks = dict(zip(first_blocks, list_blocks(prog.funcs[k])))
                step = Step.make("tuned", k, "tuned", stage=SETTLE_STAGE, trace=renamed_trace(res.trace, blocks),
                                 latency_ms=res.best_ms, measurements=res.measurements if k == group[0] else 0)
                tries["tuned"] = lambda s, step=step: s.push(step)
            state = first_correct(state, k, tries)  # a kernel on loop steps already keeps them
    return state, todo


def schedule_the_rest(state: State) -> State:
    """Kernels without a complex op and still on TVM's default schedule (a pool, an element-wise
    op that writes a conv's tiles) take their analytic schedule: unscheduled, a network runs
    50-100x slower."""
    for k in state.program.plan.kernels:
        if k.ops and state.kernel_schedule(k.name).kind == "default" and state.graph.node(k.head).kind != "complex":
            state = first_correct(state, k.head, {"expert": expert_attempt(k.head)})
    return state
