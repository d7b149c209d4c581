"""``StepBuilder``: loop steps applied as they are made, so that each step names the loops as
they are at that point (a split renames the loop it cuts). Shared by the analytic schedules."""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..loops import LoopInfo, apply_step, apply_steps, list_loops, loop_step
from ..step import Step

__all__ = ["StepBuilder"]


class StepBuilder:
    """Steps applied as they are made, so that each names the loops as they are now."""

    def __init__(self, func: tirx.PrimFunc, kernel: str, block: str) -> None:
        self.sch = apply_steps(func, [])
        self.kernel, self.block = kernel, block
        self.steps: list[Step] = []

    def loops(self) -> list[LoopInfo]:
        return list_loops(self.sch, self.block)

    def step(self, primitive: str, *, on: str | None = None, **args: Any) -> None:
        """Apply a step to the builder's block, or to block ``on``."""
        s = loop_step(primitive, self.kernel, block=on or self.block, **args)
        self.sch = apply_step(self.sch, s)
        self.steps.append(s)
