"""How a tuning result reaches a session: *attempts* by schedule kind (how to push each), tried
in the schedule policy's order (``policy.KINDS``); the first that TVM accepts and that computes
what the unscheduled kernel does is kept.

MetaSchedule measures candidates without checking their output, and a kernel that forgets part
of it looks fast: so every attempt is checked (``agreement``) before it is kept.
"""

from __future__ import annotations

import warnings
from typing import Callable, Mapping

import tvm_ffi

from ..build.agreement import disagreement
from ..base.errors import TuneWarning, WorkbenchError
from ..schedules.policy import in_order
from ..session.session import State

__all__ = ["Attempt", "first_correct", "expert_attempt", "layout_attempt", "same_kernel", "complex_kernels",
           "equal_groups"]

#: how to push one kind of schedule (``first_correct`` takes them by kind)
Attempt = Callable[[State], State]


def same_kernel(a: object, b: object) -> bool:
    """Whether two unscheduled kernels are the same computation, whatever their names."""
    return tvm_ffi.structural_equal(a.with_attr("global_symbol", "k"), b.with_attr("global_symbol", "k"))


def complex_kernels(state: State) -> list[str]:
    """The kernels that hold a complex op, in execution order."""
    return [k.name for k in state.program.plan.kernels if k.ops and state.graph.node(k.head).kind == "complex"]


def equal_groups(state: State, kernels: list[str]) -> list[list[str]]:
    """``kernels`` grouped by equal unscheduled kernels (``same_kernel``), first kernel first."""
    groups: list[list[str]] = []
    for k in kernels:
        func = state.program.funcs[k]
        same = next((g for g in groups if same_kernel(state.program.funcs[g[0]], func)), None)
        if same is None:
            groups.append([k])
        else:
            same.append(k)
    return groups


def _disagreement(state: State, kernel: str) -> str | None:
    """How the kernel's schedule changes its results (``agreement``), None when it does not."""
    if state.kernel_schedule(kernel).kind == "default":
        return None
    k = next(k for k in state.program.plan.kernels if k.name == kernel)
    return disagreement(state.program.funcs[kernel], state.scheduled_func(kernel), len(k.outputs), state.session.target)


def first_correct(state: State, op: str, tries: Mapping[str, Attempt]) -> State:
    """The first of ``tries`` (schedule kind -> attempt), in the policy's order, that TVM accepts
    and after which the kernel ``op`` (or the one holding op ``op``) computes what its
    unscheduled kernel does; ``state`` when none does. A wrong one is skipped with a warning."""
    for kind, attempt in in_order(tries):
        try:
            new = attempt(state)
        except WorkbenchError:
            continue
        kernel = op if op in new.program.funcs else new.home_kernel(op)
        if (why := _disagreement(new, kernel)) is None:
            return new
        warnings.warn(f"kernel {kernel}: the {kind} schedule gives wrong results ({why}); not used", TuneWarning,
                      stacklevel=2)
    return state


def expert_attempt(op: str, layout: object | None = None) -> Callable[[State], State]:
    """Push ``layout``'s step (a ``joint.Candidate``, if any), then the expert schedule of ``op``'s
    kernel (``State.with_expert_schedule``: the analytic one for a kernel without a complex op)."""
    def attempt(state: State) -> State:
        step = layout.step(op) if layout else None
        laid = state.push(step) if step else state
        return laid.with_expert_schedule(laid.home_kernel(op))
    return attempt


def layout_attempt(op: str, layout: object) -> Callable[[State], State]:
    """Push ``layout``'s step alone (the kernel keeps TVM's default schedule)."""
    return lambda state: state.push(step) if (step := layout.step(op)) else state
