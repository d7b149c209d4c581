"""Conversions moved through register tiles: a plain transpose by 4x4 tiles (``transposed``,
``far_block``, ``transpose_steps``), and the order model's two innermost loops where the
destination's rows gather from the source's rows (``tile_transpose``; piece by piece where the
rows cross the source's tiles at widths the tile does not divide)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from tvm import tirx

from ...base.errors import LoopError
from ...loops.primitives import list_blocks, list_loops
from ...base.step import Step
from ..builder import StepBuilder, parallel_outer
from .offsets import CopyAccess
from .pieces import Piece

__all__ = ["far_block", "tile_transpose", "transpose_steps", "transposed"]

#: the square tile a transpose moves through registers, in bytes per side: 4 fp32, a 128-bit
#: register, which LLVM transposes with in-lane shuffles (a tile of 8 fp32 it inserts lane by lane)
_TRANSPOSE_BYTES = 16
#: the far loop's block in a transpose (``far_block``), in lines: indexed by whether the far loop
#: is the destination's innermost (NCHW -> NHWC, whose tiles read a row of each channel: few
#: streams open at once) or the source's (NHWC -> NCHW: a line of channels read whole per pixel)
_FAR_LINES = {True: 2, False: 1}
#: the longest piece of a destination row, in register tile widths, that ``_piece_tile`` moves
#: through registers whole (16 floats: 16 of AVX-512's 32 registers hold the tile)
_PIECE_WIDTHS = 4


def transposed(access: CopyAccess, extents: Sequence[int]) -> tuple[int, int, int] | None:
    """``(s, d, width)`` when the conversion is a plain transpose, by ``width`` x ``width`` tiles:
    it moves every element once (no padding, halo or crop), the destination's innermost loop
    ``d`` steps evenly through the source by more than one element, and another loop ``s`` reads
    the source's rows whole (NCHW <-> NHWC, NCHW -> NCHW16c). A source tiled along either loop
    (NCHW16c -> NCHW, ALT's tiled output) or rows read a tile at a time (ALT's unfold) are left to
    the order model, which the transpose's tiles do not beat there."""
    width = _TRANSPOSE_BYTES // access.itemsize
    d = len(extents) - 1
    if width < 2 or math.prod(access.src_shape) != math.prod(access.dst_shape) or extents[d] % width:
        return None
    steps = np.diff(access.source_along(d, np.arange(extents[d], dtype=np.int64)))
    if steps[0] == 1 or np.any(steps != steps[0]):
        return None
    for s in range(d):
        if extents[s] == access.src_shape[-1] and extents[s] % width == 0 and \
                np.all(np.diff(access.source_along(s, np.arange(extents[s], dtype=np.int64))) == 1):
            return s, d, width
    return None


def far_block(access: CopyAccess, extents: Sequence[int], transpose: tuple[int, int, int],
              line: int) -> tuple[int, int]:
    """``(far, block)``: of the transpose's two loops, the one that steps far in the other
    buffer (NCHW <-> NHWC: the channels, a plane apart in NCHW), and how many of its values the
    tile sweeps at a time (the largest multiple of the tile's width that divides its extent
    and fits ``_FAR_LINES`` lines). Each of the far loop's values is a stream of its own;
    swept inside the block, the other loop's values move whole lines of the other buffer."""
    s, d, width = transpose
    src = int(abs(np.diff(access.source_along(d, np.arange(2, dtype=np.int64)))[0]))
    dst = math.prod(extents[s + 1:])  # the loops run over the destination's stored shape
    far = d if src > dst else s
    most = _FAR_LINES[far == d] * line
    if far == d and extents[s] < most:
        return far, extents[far]  # source rows too short for a prefetcher to follow anyway
    return far, max(b for b in range(width, max(width, most) + 1, width) if extents[far] % b == 0)


def transpose_steps(func: tirx.PrimFunc, kernel: str, block: str, transpose: tuple[int, int, int],
                    cores: int, sweep: tuple[int, int]) -> list[Step] | None:
    """A transpose by ``width`` x ``width`` tiles through registers: loops ``s`` and ``d`` split
    by ``width`` and moved inside the others (the destination's order, outer ones parallel),
    the far loop a block of values at a time (``sweep``, from ``far_block``); the tile is read
    into a local buffer along the source's rows (``cache_read``, vectorized) and written along
    the destination's rows (vectorized), both unrolled. None when the tile would not read a
    constant ``width`` x ``width`` region of the source.

    The order inside the other loops is far block, near tiles, far tiles within the block,
    tile: a block of channels keeps its streams of 16-byte pieces going on one side while the
    other side moves whole lines (see ``_FAR_LINES``); a far loop no longer than its block
    keeps the order source tiles, destination tiles, tile."""
    b = StepBuilder(func, kernel, block)
    names = [lp.name for lp in b.loops()]
    s, d, width = names[transpose[0]], names[transpose[1]], transpose[2]
    far, near = (d, s) if names[sweep[0]] == d else (s, d)
    blocks = sweep[1] < b.loops()[sweep[0]].extent  # else the far loop is a block
    for name in (d, s):
        b.step("split", loop=name, factors=[None, sweep[1] // width, width] if name == far and blocks
               else [None, width])
    others = [n for n in names if n not in (s, d)]
    tile = [f"{s}_{1 + (s == far and blocks)}", f"{d}_{1 + (d == far and blocks)}"]
    b.step("reorder", loops=[*others, *([f"{far}_0", f"{near}_0", f"{far}_1"] if blocks else [f"{s}_0", f"{d}_0"]),
                             *tile])
    parallel_outer(b, b.loops()[:len(others)], cores)
    return _through_registers(b, width)


def _through_registers(b: StepBuilder, width: int, cols: int | None = None) -> list[Step] | None:
    """``b``'s steps, then its two innermost loops (``width`` source rows outside, ``cols``
    (default ``width``) along the destination's row inside) moved through registers: the tile
    read into a local buffer along the source's rows (``cache_read`` at the loop outside the
    tile), both it and the block written unrolled and vectorized. None when TVM cannot bound
    the tile's source region to a constant ``width`` x ``cols`` (a row cut across a fused dim,
    or a region that varies with the outer loops)."""
    before = set(list_blocks(b.sch))
    b.step("cache_read", read_index=0, scope="local")
    (tile,) = [blk for blk in list_blocks(b.sch) if blk not in before]
    shared = len(b.loops()) - 2  # the loops down to the tile's
    b.step("compute_at", on=tile, target_block=b.block, loop=b.loops()[shared - 1].name)
    try:
        region = math.prod(lp.extent for lp in list_loops(b.sch, tile)[shared:])
    except LoopError:
        return None
    if region != width * (cols or width):
        return None
    for blk in (tile, b.block):
        inner = list_loops(b.sch, blk)
        b.step("unroll", on=blk, loop=inner[-2].name)
        b.step("vectorize", on=blk, loop=inner[-1].name)
    return b.steps


def _source_step(access: CopyAccess, p: Piece) -> int | None:
    """The source's step (elements) from one value of piece ``p`` to the next (its first two),
    None for a fused run."""
    if len(p.group) != 1:
        return None
    off = access.source_along(p.group[0], np.array([0, p.step], dtype=np.int64))
    return int(off[1] - off[0])


def tile_transpose(func: tirx.PrimFunc, kernel: str, block: str, b: StepBuilder, order: Sequence[Piece],
                   access: CopyAccess, line: int) -> list[Step] | None:
    """The order model's steps so far (``b``), then its two innermost loops through 4x4 register
    tiles, as ``transpose_steps`` moves a plain transpose: where the conversion moves every
    element once, the innermost loop (the destination's row) gathers from the source's rows at
    most a ``line`` apart (ALT's tiled output -> NCHW: W.i steps 16 floats through a source tile
    whose rows are its C.i; NCHW16c -> NCHW) and the loop outside it reads the source's rows
    (step 1), both in whole tiles. None
    when they do not, or TVM cannot bound the tile's source region to a constant 4x4."""
    width = _TRANSPOSE_BYTES // access.itemsize
    if len(order) < 2:
        return None
    (row, vec) = order[-2:]
    gather = abs(_source_step(access, vec) or 1)
    if width < 2 or not 1 < gather <= line or math.prod(access.src_shape) != math.prod(access.dst_shape):
        # (lanes from rows farther apart, e.g. a C.i gathering 16 channel planes: no gain from tiles)
        return None
    if row.extent % width or vec.extent % width or _source_step(access, row) != 1:
        return _piece_tile(func, kernel, block, b, order, access, width)
    t = _replayed(func, kernel, block, b)
    inner = [lp.name for lp in t.loops()[-2:]]
    for name in inner:
        t.step("split", loop=name, factors=[None, width])
    names = [lp.name for lp in t.loops()]
    t.step("reorder", loops=[names[-4], names[-2], names[-3], names[-1]])
    return _through_registers(t, width)


def _replayed(func: tirx.PrimFunc, kernel: str, block: str, b: StepBuilder) -> StepBuilder:
    """A new builder with ``b``'s steps applied."""
    t = StepBuilder(func, kernel, block)
    for s in b.steps:
        t.step(s.primitive, **{a: v for a, v in s.kwargs.items() if a != "block"})
    return t


def _piece_tile(func: tirx.PrimFunc, kernel: str, block: str, b: StepBuilder, order: Sequence[Piece],
                access: CopyAccess, width: int) -> list[Step] | None:
    """``tile_transpose`` where the destination's row crosses the source's tiles every ``r``
    elements, ``r`` not a multiple of the tile's ``width`` (ALT's 1x1 stride-2 output -> NCHW:
    rows of 56 W from 14-wide tiles), or the loop outside it does not read the source's rows:
    the row is split at the source's tiles (a row of one piece keeps its loop) and ``width``
    values of the innermost loop that reads the source's rows (the channels) move inside it,
    so that each piece goes through a ``width`` x ``r`` register tile. None where the pieces are
    narrower than ``width`` or wider than ``_PIECE_WIDTHS`` tiles, or no loop reads the
    source's rows in whole tiles."""
    vec = order[-1]
    if len(vec.group) != 1 or vec.extent < 2:
        return None
    off = access.source_along(vec.group[0], np.arange(vec.extent, dtype=np.int64) * vec.step)
    steps = np.diff(off)
    r = next((i + 1 for i, d in enumerate(steps) if d != steps[0]), vec.extent)
    if vec.extent % r or not width <= r <= _PIECE_WIDTHS * width or \
            np.any(np.diff(off.reshape(-1, r), axis=1) != steps[0]):
        return None
    rows = [p for p in order[:-1] if len(p.group) == 1 and p.extent % width == 0 and _source_step(access, p) == 1]
    t = _replayed(func, kernel, block, b)
    loops = t.loops()
    depth = len(order) - order.index(rows[-1]) if rows else len(loops) + 1
    if depth > len(loops) or loops[-depth].name.endswith("_fused"):
        return None  # (no such loop, or it went into the parallel loop)
    v, s = loops[-1].name, loops[-depth].name
    if r < vec.extent:
        t.step("split", loop=v, factors=[None, r])
    t.step("split", loop=s, factors=[None, width])
    names = [lp.name for lp in t.loops()]
    tile = [names[-2]] * (r < vec.extent) + [f"{s}_0", f"{s}_1", names[-1]]
    t.step("reorder", loops=[n for n in names[names.index(f"{s}_0"):] if n not in tile] + tile)
    return _through_registers(t, width, r)
