"""A sensible first schedule for a kernel, as loop steps a user can edit."""

from __future__ import annotations

from typing import Any

from ..base.errors import LoopError
from ..base.step import Step
from .apply import apply_step
from .nest import FuncOrSchedule, list_blocks, list_loops, new_schedule
from .specs import loop_step

__all__ = ["basic_schedule"]


def basic_schedule(func: FuncOrSchedule, head: str | None = None, kernel: str = "") -> list[Step]:
    """A sensible first schedule, as steps a user can edit.

    The head block (default: the first) gets its reductions moved outside its innermost
    spatial loop, which is vectorized (split by 16 when longer than 64), and its outermost
    non-unit spatial loop parallel; the blocks after it are inlined into it, or computed
    under that parallel loop. Steps TVM refuses are left out.

    Parameters
    ----------
    func : PrimFunc, IRModule or Schedule
    head : str, optional
        The block to schedule first.
    kernel : str, optional
        The kernel the steps are for (their target).

    Returns
    -------
    list of Step
        Steps that ``apply_steps`` applies without error.
    """
    sch = new_schedule(func)
    blocks = list_blocks(sch)
    head = head or blocks[0]
    steps: list[Step] = []

    def attempt(primitive: str, **args: Any) -> bool:
        nonlocal sch
        step = loop_step(primitive, kernel, **args)
        try:
            sch = apply_step(sch, step)
        except LoopError:
            return False
        steps.append(step)
        return True

    loops = list_loops(sch, head)
    spatial = [lp for lp in loops if not lp.reduction]
    reduce = [lp.name for lp in loops if lp.reduction]
    if spatial:
        outer_names, inner = [lp.name for lp in spatial[:-1]], spatial[-1].name
        if spatial[-1].extent > 64 and spatial[-1].extent % 16 == 0 \
                and attempt("split", block=head, loop=inner, factors=[None, 16]):
            outer_names, inner = outer_names + [f"{inner}_0"], f"{inner}_1"
        if reduce:
            attempt("reorder", block=head, loops=outer_names + reduce + [inner])
        attempt("vectorize", block=head, loop=inner)
    outer = next((lp.name for lp in list_loops(sch, head) if lp.extent > 1 and not lp.reduction), None)
    if outer:
        attempt("parallel", block=head, loop=outer)
    for b in reversed(blocks[blocks.index(head) + 1:]):
        if not attempt("reverse_compute_inline", block=b) and outer:
            attempt("reverse_compute_at", block=b, target_block=head, loop=outer)
    return steps
