"""Analytic schedules for a network's simple kernels that are not plain copies: a pooling or a
mean (one block whose reduction runs over a small window), possibly writing its consumer's
layout (ALT's fused conversion: ResNet-18's max pool writes the first conv's unfolded tiles).
Unscheduled, such a kernel runs on one core with scalar code: 2.7 ms for that max pool, against
0.3 ms for the same pool writing NCHW.

``window_steps(func, kernel, target)``: the window's reduction loops move outside the
destination's contiguous loop, which is vectorized at the target's lanes (each tap of the
window is then one vector operation over neighbouring outputs), and the outer spatial loops are
fused until every core has several chunks, then run in parallel. Plain copies and element-wise
kernels (one block, no reduction) take ``convert.conversion_steps``; ``simple_steps`` picks.
"""

from __future__ import annotations

import os
from typing import Mapping

from tvm import tirx

from ..errors import LoopError
from ..loops import list_blocks, list_loops
from ..step import Step
from ..targets import vector_unit
from .convert import _Builder, conversion_steps, parallel_outer

__all__ = ["simple_steps", "window_steps"]


def simple_steps(func: tirx.PrimFunc, kernel: str, target: Mapping) -> list[Step]:
    """The analytic schedule of a one-block kernel with no complex op: ``conversion_steps`` for
    a copy or an element-wise op, ``window_steps`` for a pooling. ``LoopError`` otherwise."""
    blocks = list_blocks(func)
    if len(blocks) == 1 and any(lp.reduction for lp in list_loops(func, blocks[0])):
        return window_steps(func, kernel, target)
    return conversion_steps(func, kernel, target)


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
    cores = int(target.get("num-cores") or os.cpu_count() or 1)
    b = _Builder(func, kernel, block)
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
