"""Padding stages and epilogues of an expert-scheduled kernel: whether a padding stage runs
under the main block's parallel loop (``reads_own_slice``, ``plane_loops``) or as a parallel pass
of its own (``parallel_pass``), and whether a block pads (``pads``)."""

from __future__ import annotations

import math
from typing import Any

from tvm import tirx

from ...base.errors import LoopError
from ...loops.primitives import apply_step, block_nest, list_loops, loop_step, visit_nodes
from .analysis import Analysis
from ..builder import KernelStepBuilder

__all__ = ["pads", "parallel_pass", "plane_loops", "reads_own_slice"]

#: fewest elements of a padding stage's slice worth computing under the parallel loop: a smaller
#: slice costs more in loop overhead than the pass of its own it saves
_MIN_SLICE = 256
#: fewest iterations per core of a parallel loop that pads a plane per iteration (``plane_loops``)
_TASKS_PER_CORE = 8


def reads_own_slice(b: KernelStepBuilder, block: str, m: str, loop: str, sch: Any = None) -> bool:
    """Whether a padding stage computed under the main block's parallel ``loop`` computes no more
    than the stage does: the slices TVM's ``compute_at`` gives the iterations add up to the stage
    (a grouped conv's loop over groups; no halo shared between iterations). It then runs in the
    same parallel region, its slice still in cache when the tile reads it; where iterations
    share a halo (rows of a depthwise conv) they would compute it twice, and slices of one small
    plane (``_MIN_SLICE``) do not pay. ``sch``: a trial schedule to ask instead of the builder's."""
    base = b.sch if sch is None else sch
    total = math.prod(lp.extent for lp in list_loops(base, block))
    try:
        trial = apply_step(base, loop_step("compute_at", b.kernel, block=block, target_block=m, loop=loop))
        loops = list_loops(trial, block)
    except LoopError:  # refused, or a slice whose size changes between iterations
        return False
    at = next((lp for lp in loops if lp.name == loop), None)
    piece = math.prod(lp.extent for lp in loops if lp.depth > at.depth) if at is not None else 0
    return piece >= _MIN_SLICE and at.extent * piece == total


def plane_loops(b: KernelStepBuilder, a: Analysis, m: str, outer: list[str], cores: int) -> int:
    """How many of the outer loops (outermost first) to fuse into the parallel loop, the others
    left serial inside it; 0 for all of them (the rule). Fewer where each iteration of the fused
    first ones pads a slice of its own and those of all the loops would share a halo (a
    depthwise conv: its channel planes, its blocks of rows), where one of those first loops moves
    every operand (a depthwise conv's channels; not the images of a batch, which share the
    weights: a batched plain conv keeps its rule), and given ``_TASKS_PER_CORE`` iterations per
    core: every padding stage then runs under the parallel loop, once per plane, its plane still
    in cache when the tile reads it."""
    if not a.before:
        return 0
    for k in range(len(outer), 0, -1):
        sch, loop = b.sch, outer[0]
        if k > 1:
            try:
                sch = apply_step(b.sch, loop_step("fuse", b.kernel, block=m, loops=outer[:k]))
            except LoopError:
                continue
            loop = "_".join(outer[:k]) + "_fused"
        if all(reads_own_slice(b, blk, m, loop, sch) for blk in a.before):
            wide = next(lp.extent for lp in list_loops(sch, m) if lp.name == loop) >= _TASKS_PER_CORE * cores
            planes = any(all(r.strides.get(n, 0) for r in a.reads) for n in outer[:k])
            return k if k < len(outer) and wide and planes else 0
    return 0


def pads(func: tirx.PrimFunc, block: str) -> bool:
    """Whether the block writes some elements from a condition (``if_then_else``: a pad)."""
    found: list[bool] = []
    visit_nodes(block_nest(func, block)[0].block.body, lambda n: found.append(True) if type(n).__name__ == "Call"
                and n.op.name.endswith(".if_then_else") else None)
    return bool(found)


def parallel_pass(b: KernelStepBuilder, block: str, vector: bool = True) -> None:
    """A block on its own loop nest: outer loops fused and parallel, the innermost vectorized."""
    loops = b.loops(block)
    names = [lp.name for lp in loops]
    if len(names) > 2 and b.attempt("fuse", block=block, loops=names[:-1]):
        names = ["_".join(names[:-1]) + "_fused", names[-1]]
    if len(names) > 1 or not vector:
        b.attempt("parallel", block=block, loop=names[0])
    if vector and len(names) > 1 and loops[-1].extent > 1:
        b.attempt("vectorize", block=block, loop=names[-1])
