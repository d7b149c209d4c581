"""Analytic schedules for a network's simple kernels that are not plain copies (which kernel
takes which is ``policy.analytic_steps``'s choice).

``window_steps(func, kernel, target)``: a pooling or a mean (one block whose reduction runs over
a small window), possibly writing its consumer's layout (ALT's fused conversion). The window's
reduction loops move outside the destination's contiguous loop, which is vectorized at the
target's lanes, and the outer spatial loops are fused and run in parallel: unscheduled, such a
kernel runs on one core with scalar code.

``rows_steps(func, kernel, target)``: several blocks that reduce each row and then write it
(softmax, layer norm): the output's row loops are fused and run in parallel, each reducing block
computed under them (a row's statistics are made while the row is in L1), the output's
contiguous loop vectorized. Copies and element-wise kernels take ``conversion.steps.conversion_steps``.
"""

from __future__ import annotations

import itertools
import math
from typing import Mapping

from tvm import tirx

from ..base.errors import LoopError
from ..loops.primitives import list_blocks, list_loops
from ..base.step import Step
from ..build.targets import target_cores, vector_unit
from .builder import StepBuilder, parallel_outer

__all__ = ["rows_steps", "window_steps"]


def window_steps(func: tirx.PrimFunc, kernel: str, target: Mapping) -> list[Step]:
    """Loop steps for a one-block kernel that reduces over a window (see the module docstring).

    >>> from tvm import te
    >>> x = te.placeholder((1, 10, 10, 16), name="x")
    >>> kh, kw = te.reduce_axis((0, 3), "kh"), te.reduce_axis((0, 3), "kw")
    >>> y = te.compute((1, 8, 8, 16), lambda n, h, w, c: te.max(x[n, h + kh, w + kw, c], axis=[kh, kw]), "pool")
    >>> for s in window_steps(te.create_prim_func([x, y]), "pool", {"kind": "llvm", "mcpu": "haswell", "num-cores": 2}):
    ...     print(s)
    reorder(block='pool', loops=['n', 'h', 'w', 'kh', 'kw', 'c'])
    split(block='pool', loop='c', factors=[None, 8])
    reorder(block='pool', loops=['n', 'h', 'w', 'c_0', 'kh', 'kw', 'c_1'])
    fuse(block='pool', loops=['n', 'h', 'w'])
    parallel(block='pool', loop='n_h_w_fused')
    vectorize(block='pool', loop='c_1')
    """
    blocks = list_blocks(func)
    if len(blocks) != 1:
        raise LoopError(f"kernel {kernel!r} has {len(blocks)} blocks: a window kernel has one")
    block = blocks[0]
    loops = list_loops(func, block)
    spatial = [lp for lp in loops if not lp.reduction]
    window = [lp for lp in loops if lp.reduction]
    if not window or not spatial:
        raise LoopError(f"kernel {kernel!r} has no window to reduce over or no output loop")
    lanes = vector_unit(target).lanes
    cores = target_cores(target)
    b = StepBuilder(func, kernel, block)
    # 1. the window's loops inside every output loop but the contiguous one
    names = [lp.name for lp in spatial[:-1] + window + spatial[-1:]]
    if names != [lp.name for lp in loops]:
        b.step("reorder", loops=names)
    inner = spatial[-1]
    vector = inner.extent >= 2
    if inner.extent > lanes and inner.extent % lanes == 0:  # whole vectors; the outer part joins the outer loops
        b.step("split", loop=inner.name, factors=[None, lanes])
        now, outside = [lp.name for lp in b.loops()], len(spatial) - 1
        b.step("reorder", loops=[*now[:outside], now[-2], *now[outside:-2], now[-1]])
    elif inner.extent > 4 * lanes:  # no whole vectors and too long for one: left scalar
        vector = False
    # 2. parallel outer loops: fused until every core has several chunks
    parallel_outer(b, [lp for lp in b.loops() if not lp.reduction][:-1], cores)
    if vector:
        b.step("vectorize", loop=b.loops()[-1].name)
    return b.steps


def rows_steps(func: tirx.PrimFunc, kernel: str, target: Mapping) -> list[Step]:
    """Loop steps for a kernel whose first blocks reduce rows that its last block writes (see the
    module docstring). The row loops are the output's leading loops that every reducing block
    also runs over, with the same extents; with fewer rows than two per core, each block is
    scheduled apart instead (its own rows parallel, its contiguous loop vectorized).

    >>> from tvm import te
    >>> x = te.placeholder((4, 64), name="x")
    >>> r = te.reduce_axis((0, 64), "r")
    >>> m = te.compute((4, 1), lambda i, j: te.max(x[i, r], axis=r), "mx")
    >>> y = te.compute((4, 64), lambda i, j: x[i, j] - m[i, 0], "y")
    >>> for s in rows_steps(te.create_prim_func([x, y]), "k", {"kind": "llvm", "mcpu": "haswell", "num-cores": 2}):
    ...     print(s)
    parallel(block='y', loop='i')
    compute_at(block='mx', target_block='y', loop='i')
    split(block='y', loop='j', factors=[None, 8])
    vectorize(block='y', loop='j_1')
    """
    blocks = list_blocks(func)
    if len(blocks) < 2:
        raise LoopError(f"kernel {kernel!r} has one block: rows_steps is for a reduction followed by its output")
    out, producers = blocks[-1], blocks[:-1]
    loops = list_loops(func, out)
    rows = 0
    for k, lp in enumerate(loops[:-1]):
        if lp.reduction or not all(_spatial(func, b)[k:k + 1] == [lp.extent] for b in producers):
            break
        rows = k + 1
    lanes = vector_unit(target).lanes
    cores = target_cores(target)
    b = StepBuilder(func, kernel, out)
    if math.prod(lp.extent for lp in loops[:rows]) < 2 * cores:
        # too few shared rows to split over the cores (none, or an output written in its
        # consumer's tiles, whose loops are not the statistics' rows): each block on its own
        return _blocks_apart(b, blocks, lanes, cores)
    if rows > 1:
        b.step("fuse", loops=[lp.name for lp in loops[:rows]])
    row = b.loops()[0].name
    if cores > 1:
        b.step("parallel", loop=row)
    for producer in reversed(producers):  # each under the row loop, consumers first
        b.step("compute_at", on=producer, target_block=out, loop=row)
    _vectorize_inner(b, lanes)
    return b.steps


def _blocks_apart(b: StepBuilder, blocks: list[str], lanes: int, cores: int) -> list[Step]:
    """Each block's leading spatial loops fused and parallel, its innermost loop vectorized
    when it is spatial (a block whose reduction runs innermost keeps it scalar)."""
    for block in blocks:
        b.block = block
        loops = b.loops()
        lead = list(itertools.takewhile(lambda lp: not lp.reduction, loops))
        vector = not loops[-1].reduction and len(loops) > 1
        parallel_outer(b, lead[:-1] if vector else lead, cores)
        if vector:
            _vectorize_inner(b, lanes)
    return b.steps


def _vectorize_inner(b: StepBuilder, lanes: int) -> None:
    """The block's innermost loop as whole vectors (split by the lanes when longer), or whole
    when it is short; a long loop that no whole vector divides stays scalar."""
    inner = b.loops()[-1]
    if len(b.loops()) < 2 or inner.extent < 2:
        return
    if inner.extent > lanes and inner.extent % lanes == 0:
        b.step("split", loop=inner.name, factors=[None, lanes])
        b.step("vectorize", loop=b.loops()[-1].name)
    elif inner.extent <= 4 * lanes:
        b.step("vectorize", loop=inner.name)


def _spatial(func: tirx.PrimFunc, block: str) -> list[int]:
    """The extents of a block's spatial loops, outermost first."""
    return [lp.extent for lp in list_loops(func, block) if not lp.reduction]
