"""Step builders shared by the analytic schedules: loop steps applied as they are made, so that
each step names the loops as they are at that point (a split renames the loop it cuts).
``StepBuilder`` works on one block, ``KernelStepBuilder`` on any block of the kernel;
``parallel_outer`` fuses and parallelizes a builder's outer loops."""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..base.errors import LoopError
from ..loops.primitives import LoopInfo, apply_step, apply_steps, list_loops, loop_step
from ..base.step import Step

__all__ = ["KernelStepBuilder", "StepBuilder", "parallel_outer", "wanted_chunks"]

#: parallel chunks wanted per core (load balance across cores of unequal speed or load)
_CHUNKS_PER_CORE = 8


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


class KernelStepBuilder:
    """Steps on any block of a kernel (each names its block), applied one by one to a running
    schedule, so later steps can read the loop names."""

    def __init__(self, func: tirx.PrimFunc, kernel: str) -> None:
        self.sch: Any = func
        self.kernel = kernel
        self.steps: list[Step] = []

    def do(self, primitive: str, **args: Any) -> None:
        step = loop_step(primitive, self.kernel, **args)
        self.sch = apply_step(self.sch, step)
        self.steps.append(step)

    def attempt(self, primitive: str, **args: Any) -> bool:
        """Apply a step that TVM may refuse for some kernels (e.g. inlining a non-element-wise block)."""
        try:
            self.do(primitive, **args)
        except LoopError:
            return False
        return True

    def loops(self, block: str) -> list[LoopInfo]:
        return list_loops(self.sch, block)


def wanted_chunks(cores: int) -> int:
    """How many chunks the parallel loop should have."""
    return cores * _CHUNKS_PER_CORE


def parallel_outer(b: StepBuilder, outer: list, cores: int) -> None:
    """Fuse the first of the ``outer`` loops until every core has several chunks, and run the
    fused loop in parallel (a single chunk or a single core: left serial)."""
    take, chunks = 0, 1
    while take < len(outer) and chunks < wanted_chunks(cores):
        chunks *= outer[take].extent
        take += 1
    if take > 1:
        b.step("fuse", loops=[lp.name for lp in outer[:take]])
    if take and b.loops()[0].extent > 1 and cores > 1:
        b.step("parallel", loop=b.loops()[0].name)
