"""A tile buffer for destination rows gathered across the source's tiles: the block writes a
buffer of the largest tile of its inner loops that fits half the L2, copied to the destination
row by row after the tile (``rows_across_tiles``, ``through_buffer``)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...loops.primitives import list_blocks, list_loops
from ..builder import StepBuilder
from .offsets import CopyAccess
from .pieces import MAX_VECTORS, divisor_near, source_tiles
from .traffic import Cache

__all__ = ["rows_across_tiles", "through_buffer"]

def rows_across_tiles(access: CopyAccess, extents: Sequence[int], cache: Cache) -> bool:
    """Whether the destination's rows (its innermost loop) are whole lines gathered lane by lane
    (the source's step along them is not one element) across several source tiles: the order
    then writes each row a tile's width at a time, row after row. (Rows gathered from one tile,
    NCHW16c -> NCHW, and the other conversions lose through a buffer.)"""
    k = len(extents) - 1
    if extents[k] < 2 or extents[k] % cache.line:
        return False
    step = int(abs(np.diff(access.source_along(k, np.arange(2, dtype=np.int64)))[0]))
    return step != 1 and bool(source_tiles(lambda v: access.source_along(k, v), extents[k]))


def through_buffer(b: StepBuilder, cache: Cache, lanes: int) -> None:
    """Write the block into a buffer holding the largest tile of its inner loops that fits half
    the L2, and copy it to the destination after the tile, the destination's rows vectorized.

    Every line of the tile is then written with full-width stores from L1 one after the other,
    not lane by lane between reads (ALT's tiled output -> NCHW, its 16x16 tiles gathered into
    rows of the destination)."""
    size = 1
    for at in reversed(b.loops()):
        if size * at.extent > cache.cap:
            break  # the tile: this loop's body
        size *= at.extent
    else:
        return  # the whole kernel fits: no buffer
    if at.kind == "vectorized" or size < 2 * cache.line:
        return
    before = set(list_blocks(b.sch))
    b.step("cache_write", write_index=0, scope="global")
    (back,) = [blk for blk in list_blocks(b.sch) if blk not in before]
    b.step("reverse_compute_at", on=back, target_block=b.block, loop=at.name)
    inner = list_loops(b.sch, back)[-1]
    if inner.extent % lanes == 0 and inner.extent > lanes:
        b.step("split", on=back, loop=inner.name, factors=[None, lanes])
        inner = list_loops(b.sch, back)[-1]
    elif inner.extent > MAX_VECTORS * lanes:
        b.step("split", on=back, loop=inner.name,
               factors=[None, divisor_near(inner.extent, lanes, MAX_VECTORS * lanes)])
        inner = list_loops(b.sch, back)[-1]
    b.step("vectorize", on=back, loop=inner.name)
