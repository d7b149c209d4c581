"""What the pages show of a replayed session's kernels, as our own dataclasses: the pages get
loop tables, scripts, cache profiles and counters, never a TVM ``PrimFunc`` or built module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..measure.counters import Counters, perf_counters
from ..measure.footprint import Profile, profile_kernel
from ..loops.dims import loop_dims
from ..loops.primitives import LoopInfo, block_writes, list_blocks, list_loops, script
from ..build.lower import stage_layouts
from .session import State

__all__ = ["NestView", "nest_view", "cache_profile", "state_counters"]


@dataclass(frozen=True)
class NestView:
    """A kernel's blocks (in order), the loops around each (outermost first), its TVMScript,
    block -> loop -> name, the layout dims a loop runs over (``loopdims``; not every loop has one),
    and the buffers each block writes (name, shape; ``loops.nest.block_writes``)."""

    kernel: str
    blocks: tuple[str, ...]
    loops: Mapping[str, tuple[LoopInfo, ...]]
    script: str
    dims: Mapping[str, Mapping[str, str]]
    writes: Mapping[str, tuple[tuple[str, tuple[int, ...]], ...]]


def nest_view(state: State, kernel: str) -> NestView:
    """The kernel after its schedule (see ``State.kernel_schedule``)."""
    func = state.scheduled_func(kernel)
    blocks = tuple(list_blocks(func))
    plan = state.program.plan
    stages = stage_layouts(plan, next(k for k in plan.kernels if k.name == kernel))
    dims = loop_dims(func, {name: [d.name for d in lay.dims] for name, lay in stages.items()})
    return NestView(kernel, blocks, {b: tuple(list_loops(func, b)) for b in blocks}, script(func), dims,
                    {b: tuple(block_writes(func, b)) for b in blocks})


def cache_profile(state: State, kernel: str, caches: Mapping[str, int], line_bytes: int) -> Profile:
    """Footprint per loop level and estimated misses of the scheduled kernel."""
    return profile_kernel(state.scheduled_func(kernel), dict(caches), line_bytes, kernel)


def state_counters(state: State, kernel: str) -> Counters:
    """Hardware counters of one kernel of the scheduled program, or the reason there are none."""
    return perf_counters(state.scheduled_program().build(state.session.target), kernel)
