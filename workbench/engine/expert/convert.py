"""Analytic schedules for layout-conversion kernels: a conversion moves memory and computes
nothing, so its schedule aims at the copy bandwidth (STREAM's copy, ``ceilings.copy_gbs``).

``conversion_steps(func, kernel, target)`` gives the schedule as the session's own ``loop``
steps, from the kernel's single block (its loops run over the destination's stored shape): the
destination's contiguous run is vectorized at the target's lanes (``_vector_run``), loops that
cross the source's tiles are cut at them (``_source_tiles``), the pieces are ordered by a model
of the lines each loop touches (``_order``) and the outer ones run in parallel
(``parallel_outer``, never on less than a line of the rows: ``_whole_lines_apart``). Rows that
gather their lanes go through register tiles (``_tile_transpose``, ``_piece_tile``) or a tile
buffer (``_through_buffer``); padded reads are cut into border and interior ranges (``_borders``);
interleaved rows are vectorized along the rows (``_interleave``); a plain transpose moves 4x4
tiles through registers (``_transpose_steps``). ``conversion_ms`` times a conversion kernel and
``conversion_bandwidth`` rates it against the machine's copy bandwidth.
"""

from __future__ import annotations

import itertools
import math
import mmap
import operator
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tvm
from tvm import tirx
from tvm.sym import Analyzer

from ..ceilings import cache_info, get_ceilings
from .. import codegen
from ..errors import LoopError
from ..loops import LoopInfo, apply_steps, block_nest, list_blocks, list_loops, visit_nodes
from ..step import Step
from ..targets import resolve_target, target_cores, vector_unit
from .builder import StepBuilder

__all__ = ["conversion_steps", "default_steps", "scheduled_conversions", "Bandwidth", "conversion_bandwidth",
           "conversion_ms"]

#: parallel chunks wanted per core (load balance across cores of unequal speed or load)
_CHUNKS_PER_CORE = 8
#: widest vector loop, in vectors, for a run that does not divide the lanes
_MAX_VECTORS = 4
#: the least relative gain for which the order model takes one more loop into its tile
_GAIN = 0.01
#: what a run of writes weighs against a run of reads: a read that misses stalls the core
#: until the prefetcher follows the run; writes wait in the store buffer and the caches
_WRITE_RUN = 0.5
#: the fewest lines a run of the source's lines holds, on average, for ``_whole_rows`` to write rows
#: whole instead of in passes (16 lines, 1 KiB: the prefetcher follows such runs; at 2 lines a run it
#: does not)
_LONG_READ = 16
#: on the CPUs of ``_SCATTER_AVERSE`` (LLVM names), where the model's order writes fewer than
#: ``_SHORT`` lines to each page in its innermost two loops, the destination's order (one
#: sequential stream of writes) replaces it unless it reads more than ``_TIE`` more lines: AMD's
#: Zen loses more to writes scattered over many pages than to extra reads; Intel's CPUs do not.
_SHORT = 2
_TIE = 0.05
_SCATTER_AVERSE = ("znver",)
#: the square tile a transpose moves through registers, in bytes per side: 4 fp32, a 128-bit
#: register, which LLVM transposes with in-lane shuffles (a tile of 8 fp32 it inserts lane by lane)
_TRANSPOSE_BYTES = 16
#: the far loop's block in a transpose (``_far_block``), in lines: indexed by whether the far loop
#: is the destination's innermost (NCHW -> NHWC, whose tiles read a row of each channel: few
#: streams open at once) or the source's (NHWC -> NCHW: a line of channels read whole per pixel)
_FAR_LINES = {True: 2, False: 1}
#: the least vector lanes for which a gathered destination row goes through register tiles
#: (``_tile_transpose``), by CPU: on AVX-512 LLVM builds a 16-float gather from 15 in-lane
#: inserts; on the CPUs of ``_TILE_AVERSE`` an 8-lane target keeps the order model's gather,
#: which the tiles did not beat there
_TILE_GATHER_LANES = 16
#: the least vector lanes for register tiles on the other CPUs (LLVM names; AVX2's 8)
_TILE_LANES = 8
_TILE_AVERSE = ("znver",)
#: the longest piece of a destination row, in register tile widths, that ``_piece_tile`` moves
#: through registers whole (16 floats: 16 of AVX-512's 32 registers hold the tile)
_PIECE_WIDTHS = 4
#: the most loops ``_borders`` cuts into border and interior ranges (each cut copies the body
#: once per range: two cuts, up to nine copies)
_BORDER_LOOPS = 2
#: the most of the source's rows a destination row interleaves for ``_interleave`` (its stores
#: merge into one shuffle of as many vectors: ``codegen``'s limit)
_INTERLEAVE = codegen.MOST_STORES
#: the longest border range ``_borders`` cuts a value at a time for a vector along an inner
#: loop (``_interleave``): in each such copy the row's own borders are then constants
_BORDER_VALUES = 2


def conversion_steps(func: tirx.PrimFunc, kernel: str, target: Mapping) -> list[Step]:
    """The analytic schedule of a layout-conversion kernel, as loop steps.

    Parameters
    ----------
    func : tvm.tirx.PrimFunc
        The conversion kernel as lowered (``State.program.funcs[kernel]``), unscheduled: one
        block whose loops run over the destination's stored shape.
    kernel : str
        The kernel's name (the steps' target).
    target : Mapping
        The session's target: vector lanes from its CPU, cores from ``num-cores``.

    Returns
    -------
    list of Step
        ``loop`` steps that ``loops.apply_steps(func, steps)`` applies.

    Raises
    ------
    LoopError
        When the kernel is not a single-block copy (it has a reduction or several blocks).
    """
    blocks = list_blocks(func)
    if len(blocks) != 1:
        raise LoopError(f"kernel {kernel!r} has {len(blocks)} blocks: a conversion kernel has one")
    block = blocks[0]
    loops = list_loops(func, block)
    if not loops or any(lp.reduction for lp in loops):
        raise LoopError(f"kernel {kernel!r} is not a layout conversion (block {block!r} has a reduction or no loops)")
    lanes = vector_unit(target).lanes
    cores = target_cores(target)
    access = _Access.of(func, block, loops)
    cache = _Cache.of(access.itemsize if access else 4)
    extents = [lp.extent for lp in loops]
    if access is not None and (transpose := _transposed(access, extents)) and \
            (steps := _transpose_steps(func, kernel, block, transpose, cores, _far_block(access, extents, transpose,
                                                                                           cache.line))):
        return steps
    # on 8 lanes the tile's order is made for a line-wide vector (AVX-512's 16 fp32), so that the
    # tile's rows write whole lines (ordered for 8 lanes, a line's W pieces fall outside its rows)
    tiles = access is not None and _register_tiles(target, lanes)
    wide = max(lanes, cache.line) if tiles and lanes < _TILE_GATHER_LANES else lanes
    b, order = _ordered(func, kernel, block, extents, access, cache, wide, cores, target)
    if tiles and (steps := _tile_transpose(func, kernel, block, b, order, access, cache.line)):
        return steps
    if wide != lanes:
        b, order = _ordered(func, kernel, block, extents, access, cache, lanes, cores, target)
    across = access is not None and _rows_across_tiles(access, extents, cache)
    if not across and _interleaves(access, [lp.name for lp in loops], b.loops(), lanes, cache.line):
        _interleave(b, lanes)
        return b.steps
    # 4. vectorize the innermost loop
    b.step("vectorize", loop=b.loops()[-1].name)
    # 5. rows gathered across the source's tiles go through a buffer, written back whole;
    # else a padded read's borders apart from its interior
    if across:
        _through_buffer(b, cache, lanes)
    else:
        _borders(b)
    return b.steps


def _register_tiles(target: Mapping, lanes: int) -> bool:
    """Whether gathered destination rows may go through register tiles (``_tile_transpose``) on
    ``target`` (``_TILE_GATHER_LANES``)."""
    return lanes >= _TILE_GATHER_LANES or (lanes >= _TILE_LANES and not _cpu_is(target, _TILE_AVERSE))


def _cpu_is(target: Mapping, prefixes: tuple[str, ...]) -> bool:
    """Whether ``target``'s CPU (its LLVM ``mcpu``, the host's where it names none) starts with
    one of ``prefixes``."""
    return str(resolve_target(target).get("mcpu", "")).startswith(prefixes)


def _ordered(func: tirx.PrimFunc, kernel: str, block: str, extents: Sequence[int], access: _Access | None,
             cache: _Cache, lanes: int, cores: int, target: Mapping) -> tuple[StepBuilder, list[_Piece]]:
    """The order model's schedule for vectors of ``lanes``: its steps so far (a builder: the
    vector run fused, the splits, the order, the parallel loop) and the pieces in their order."""
    run, width = _vector_run(extents, lanes)
    groups = [(k,) for k in range(len(extents) - run)] + [tuple(range(len(extents) - run, len(extents)))]
    sizes = [_group_sizes(access, extents, g, width if i == len(groups) - 1 else None, cache.line)
             for i, g in enumerate(groups)]
    b = StepBuilder(func, kernel, block)

    # 1. the vector run fused; every group split at the source's tiles (the run by the lanes too)
    if run > 1:
        b.step("fuse", loops=[lp.name for lp in b.loops()[-run:]])
    for i in reversed(range(len(groups))):  # innermost first: the outer loops keep their places
        if len(sizes[i]) > 1:
            b.step("split", loop=b.loops()[i].name, factors=[None, *sizes[i][1:]])
    pieces: list[_Piece] = []
    for g, sz in zip(groups, sizes):
        pieces += [_Piece(g, ext, math.prod(sz[j + 1:]), len(pieces) + j) for j, ext in enumerate(sz)]
    # 2. the order: the vector piece innermost, then the cheapest footprint outwards
    order = _order(pieces, extents, access, cache)
    if access is not None and _cpu_is(target, _SCATTER_AVERSE) and \
            _scatters(order, extents, access, cache) and \
            _traffic(pieces, extents, access, cache) <= _traffic(order, extents, access, cache) * (1 + _TIE):
        order = pieces  # as few lines read, and the writes in one sequential stream
    # 3. parallel outer loops, none that splits the destination's lines between threads
    order, shared = _whole_lines_apart(order, extents, cache, cores)
    if [p.pos for p in order] != list(range(len(pieces))):
        names = [lp.name for lp in b.loops()]
        b.step("reorder", loops=[names[p.pos] for p in order])
    parallel_outer(b, b.loops()[:shared], cores)
    return b, order


def _whole_lines_apart(order: list[_Piece], extents: Sequence[int], cache: _Cache,
                       cores: int) -> tuple[list[_Piece], int]:
    """``order`` with the outer pieces of the destination's rows (of its innermost loop) that
    step less than a line moved inside the loops that ``parallel_outer`` runs in parallel, and
    how many loops it may fuse: each parallel chunk then writes whole rows, not a column of
    pieces a few floats wide, which threads would share line by line. Pieces of other loops stay
    (a stem unfold's 9-float rows are whole rows already)."""
    head: list[_Piece] = []
    later: list[_Piece] = []
    chunks = 1
    row = len(extents) - 1
    for p in order[:-1]:
        if chunks >= _wanted_chunks(cores):
            break
        # (the destination's innermost loop: its pieces' steps are destination elements)
        if p.extent > 1 and row in p.group and p.step < cache.line:
            later.append(p)
        else:
            head.append(p)
            chunks *= p.extent
    if not later or chunks < _wanted_chunks(cores):
        return order, len(order) - 1  # (too few whole-row chunks: the model's order stays)
    return head + later + [p for p in order if p not in head and p not in later], len(head)


def _transposed(access: _Access, extents: Sequence[int]) -> tuple[int, int, int] | None:
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


def _far_block(access: _Access, extents: Sequence[int], transpose: tuple[int, int, int],
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


def _transpose_steps(func: tirx.PrimFunc, kernel: str, block: str, transpose: tuple[int, int, int],
                     cores: int, far_block: tuple[int, int]) -> list[Step] | None:
    """A transpose by ``width`` x ``width`` tiles through registers: loops ``s`` and ``d`` split
    by ``width`` and moved inside the others (the destination's order, outer ones parallel),
    the far loop (``_far_block``) a block of values at a time; the tile is read into a local
    buffer along the source's rows (``cache_read``, vectorized) and written along the
    destination's rows (vectorized), both unrolled. None when the tile would not read a
    constant ``width`` x ``width`` region of the source.

    The order inside the other loops is far block, near tiles, far tiles within the block,
    tile: a block of channels keeps its streams of 16-byte pieces going on one side while the
    other side moves whole lines (see ``_FAR_LINES``); a far loop no longer than its block
    keeps the order source tiles, destination tiles, tile."""
    b = StepBuilder(func, kernel, block)
    names = [lp.name for lp in b.loops()]
    s, d, width = names[transpose[0]], names[transpose[1]], transpose[2]
    far, near = (d, s) if names[far_block[0]] == d else (s, d)
    blocks = far_block[1] < b.loops()[far_block[0]].extent  # else the far loop is a block
    for name in (d, s):
        b.step("split", loop=name, factors=[None, far_block[1] // width, width] if name == far and blocks
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


def _source_step(access: _Access, p: _Piece) -> int | None:
    """The source's step (elements) from one value of piece ``p`` to the next (its first two),
    None for a fused run."""
    if len(p.group) != 1:
        return None
    off = access.source_along(p.group[0], np.array([0, p.step], dtype=np.int64))
    return int(off[1] - off[0])


def _tile_transpose(func: tirx.PrimFunc, kernel: str, block: str, b: StepBuilder, order: Sequence[_Piece],
                    access: _Access, line: int) -> list[Step] | None:
    """The order model's steps so far (``b``), then its two innermost loops through 4x4 register
    tiles, as ``_transpose_steps`` moves a plain transpose: where the conversion moves every
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


def _piece_tile(func: tirx.PrimFunc, kernel: str, block: str, b: StepBuilder, order: Sequence[_Piece],
                access: _Access, width: int) -> list[Step] | None:
    """``_tile_transpose`` where the destination's row crosses the source's tiles every ``r``
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


def _rows_across_tiles(access: _Access, extents: Sequence[int], cache: _Cache) -> bool:
    """Whether the destination's rows (its innermost loop) are whole lines gathered lane by lane
    (the source's step along them is not one element) across several source tiles: the order
    then writes each row a tile's width at a time, row after row. (Rows gathered from one tile,
    NCHW16c -> NCHW, and the other conversions lose through a buffer.)"""
    k = len(extents) - 1
    if extents[k] < 2 or extents[k] % cache.line:
        return False
    step = int(abs(np.diff(access.source_along(k, np.arange(2, dtype=np.int64)))[0]))
    return step != 1 and bool(_source_tiles(lambda v: access.source_along(k, v), extents[k]))


def _through_buffer(b: StepBuilder, cache: _Cache, lanes: int) -> None:
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
    elif inner.extent > _MAX_VECTORS * lanes:
        b.step("split", on=back, loop=inner.name, factors=[None, _divisor_near(inner.extent, lanes, _MAX_VECTORS * lanes)])
        inner = list_loops(b.sch, back)[-1]
    b.step("vectorize", on=back, loop=inner.name)


def _interleaves(access: _Access | None, names: Sequence[str], loops: Sequence[LoopInfo], lanes: int,
                 line: int) -> bool:
    """Whether the destination's rows interleave a few of the source's rows (``_interleave``):
    its innermost loop short (2 to ``_INTERLEAVE``, fewer than the lanes) and read at least a
    line apart, the serial loop outside it at least half a vector long, read along the source's
    rows and written that short loop's extent apart. ALT's stem unfold: rows of 37 W x 3
    channels from 3 channel planes; the suite's stem at batch 1, rows of 13 W, one 13-lane
    vector on AVX-512. ``names``: the kernel's loops as lowered (what ``access`` reads);
    ``loops``: as scheduled so far; ``line``: a cache line, in elements."""
    if access is None or len(loops) < 2 or any(lp.name not in names for lp in loops[-2:]):
        return False
    w, c = loops[-2], loops[-1]
    if not 2 <= c.extent <= _INTERLEAVE or c.extent >= lanes or 2 * w.extent < lanes or \
            (w.kind, c.kind) != ("serial", "serial"):  # a row loop that is the parallel one stays whole
        return False
    kw, kc = names.index(w.name), names.index(c.name)

    def strides(k: int) -> tuple[int, int]:
        values: list[Any] = [0] * len(names)
        values[k] = np.array([0, 1])
        src, dst = (np.broadcast_to(x, (2,)) for x in access.offsets(values))
        return int(src[1] - src[0]), int(dst[1] - dst[0])

    (src_w, dst_w), (src_c, dst_c) = strides(kw), strides(kc)
    return src_w == 1 and dst_c == 1 and dst_w == c.extent and abs(src_c) >= line


def _interleave(b: StepBuilder, lanes: int) -> None:
    """Vectorize along the source's rows and unroll the short loop inside: ``k`` stores of a
    vector each ``k`` elements apart, which ``codegen.MergeStridedStores`` writes as one dense
    store of a shuffle (3 loads, 3 permutes and 3 stores per 48 floats on AVX-512, where the
    channels as the vector took 16 three-lane gathers and stores: ALT's stem unfold, tiles
    [4, 16]). A pad condition that varies along the rows would leave each lane testing the
    image's border: the loops it varies with are cut first (``_borders``, each border value a
    copy of its own), then in each copy the row loop itself where the condition changes
    (``_row_runs``); a piece where TVM cannot tell, or a long one past the row's start (which
    cannot be split), keeps the short loop as the vector (``_row_pieces``). A row that is not a
    whole number of vectors ends in a narrower one."""
    w, c = (lp.name for lp in b.loops()[-2:])
    _borders(b, lane=-2)
    # the body's copies: the blocks right inside the row and short loops
    copies = [x for x in list_blocks(b.sch) if [lp.name for lp in list_loops(b.sch, x)][-2:] == [w, c]]
    for block in copies:
        pieces = _row_pieces(_row_runs(b.sch.mod["main"], block), lanes)
        parts = [(block, w)]
        if len(pieces) > 1:
            b.step("loop_partition", on=block, loop=w, factors=[n for n, _ in pieces])
            parts = [(f"{block}_{w}{i}", f"{w}{i}") for i in range(len(pieces))]
        for (on, loop), (n, along) in zip(parts, pieces):
            if not along:
                b.step("vectorize", on=on, loop=c)
                continue
            inner = loop
            if n > lanes:  # whole vectors from the row's start (only a loop from 0 splits)
                b.step("split", on=on, loop=loop, factors=[None, lanes])
                inner = f"{loop}_1"
                b.step("reorder", on=on, loops=[f"{loop}_0", c, inner])
            else:
                b.step("reorder", on=on, loops=[c, inner])
            b.step("unroll", on=on, loop=c)
            b.step("vectorize", on=on, loop=inner)


def _row_pieces(runs: Sequence[tuple[int, bool]], lanes: int) -> list[tuple[int, bool]]:
    """The row loop's pieces (``loop_partition`` counts), each with whether it is a vector along
    the row: a decided run from the row's start in whole vectors (split later) and the rest; one
    further in, vector by vector (a loop that does not start at 0 cannot be split), up to
    ``_MAX_VECTORS``; an undecided run, or a longer one, keeps the short loop as the vector.

    >>> _row_pieces([(3, True), (34, True)], 16)
    [(3, True), (16, True), (16, True), (2, True)]
    >>> _row_pieces([(37, True)], 16), _row_pieces([(5, False), (200, True)], 16)
    ([(32, True), (5, True)], [(5, False), (200, False)])
    """
    pieces: list[tuple[int, bool]] = []
    at = 0
    for n, known in runs:
        whole = n // lanes * lanes
        if not known or (at and whole > _MAX_VECTORS * lanes):
            pieces.append((n, False))
        elif at == 0:
            pieces += [(whole, True)] * bool(whole) + [(n - whole, True)] * (n > whole)
        else:
            pieces += [(lanes, True)] * (n // lanes) + [(n - whole, True)] * (n > whole)
        at += n
    return pieces


def _row_runs(func: tirx.PrimFunc, block: str) -> list[tuple[int, bool]]:
    """The row loop's (second innermost) values in runs over which TVM's analyzer decides the
    pad condition's terms that vary along it the same way: all hold (the source's row), or one
    fails (zeros); each run's length and whether it is decided (an undecided run, where it
    depends on a loop outside, keeps a condition per lane)."""
    terms, analyzer = _open_terms(func, block, lane=-2)
    row = block_nest(func, block)[1][-2]
    terms = [t for t in terms if _uses(t, row.loop_var)]
    extent, start = int(row.extent), int(row.min)
    if not terms:
        return [(extent, True)]

    def state(v: int) -> str | None:
        ana = analyzer(row.loop_var, v)
        simple = [ana.rewrite_simplify(t) for t in terms]
        if all(ana.can_prove(t) for t in simple):
            return "in"
        return "out" if any(ana.can_prove(tirx.Not(t)) for t in simple) else None

    return [(len(list(run)), key is not None)
            for key, run in itertools.groupby(state(v) for v in range(start, start + extent))]


def _borders(b: StepBuilder, lane: int = -1) -> None:
    """Cut the loops whose values enter the block's pad condition into border and interior ranges
    (``loop_partition``), innermost first, at most ``_BORDER_LOOPS`` of them: TVM then proves the
    condition within each interior copy and drops it there. (ALT's stem unfold, 9-float tile rows
    whose lanes each carry the condition, compiled to a branch and a scalar copy per lane; its
    interior copies a row with one 8-lane and one scalar load and store.)"""
    cuts = _interiors(b.sch.mod["main"], b.block, lane)[:_BORDER_LOOPS]
    for k, (loop, lo, hi, along) in enumerate(cuts):
        counts = [n for n in (lo, hi - lo, loop.extent - hi) if n]
        if lane != -1 and along and max(lo, loop.extent - hi) <= _BORDER_VALUES:
            # a vector along a loop inside whose border moves with this loop: a value at a time
            counts = [1] * lo + [hi - lo] + [1] * (loop.extent - hi)
        # the first cut is in the block; the loops outside a cut enclose its copies' common block
        on = b.block if k == 0 else next(x for x in list_blocks(b.sch)
                                         if any(lp.name == loop.name for lp in list_loops(b.sch, x)))
        b.step("loop_partition", on=on, loop=loop.name, factors=counts)


def _open_terms(func: tirx.PrimFunc, block: str, lane: int = -1) -> tuple[list[Any], Callable[..., Analyzer]]:
    """The terms of ``block``'s pad condition that TVM's analyzer cannot prove over the block's
    loops, when one of them varies along loop ``lane`` (the vector's; else none), and a maker of
    analyzers over those loops (one of them fixed at a value)."""
    realize, fors = block_nest(func, block)
    cond = _pad_condition(realize.block.body)
    ranges = {f.loop_var: tvm.ir.Range.from_min_extent(f.min, f.extent) for f in fors}

    def analyzer(fixed: Any = None, value: int = 0) -> Analyzer:
        ana = Analyzer()
        for var, rng in ranges.items():
            ana.bind(var, tvm.ir.Range.from_min_extent(value, 1) if var.same_as(fixed) else rng)
        for iv, val in zip(realize.block.iter_vars, realize.iter_values):
            ana.bind(iv.var, val)
        return ana

    if cond is None or len(fors) < -lane:
        return [], analyzer
    full = analyzer()
    terms = [t for t in (full.rewrite_simplify(t) for t in _conjuncts(cond)) if not full.can_prove(t)]
    if not any(_uses(t, fors[lane].loop_var) for t in terms):
        return [], analyzer  # a condition the vector's lanes share costs a branch per vector only
    return terms, analyzer


def _interiors(func: tirx.PrimFunc, block: str, lane: int = -1) -> list[tuple[LoopInfo, int, int, bool]]:
    """The serial loops of ``block`` with an interior: a range ``[lo, hi)`` of the loop's values,
    at least half its extent and not all of it, where TVM's analyzer proves every term of the
    pad condition (``if_then_else`` around the block's value) that the loop enters, for every
    value of the other loops; innermost first. None unless the condition varies across the
    vector's lanes (loop ``lane``; the loops inside a vector loop other than the innermost are
    not cut): where the lanes share it (ALT's 3x3 unfold, channels in the vector), a branch per
    vector costs less than the copies a cut makes. Each with whether a term it enters varies
    along the vector's loop too."""
    terms, analyzer = _open_terms(func, block, lane)
    if not terms:  # (none also where there are fewer loops than ``lane`` reaches)
        return []
    fors = block_nest(func, block)[1]
    infos = list_loops(func, block)
    lane_var = fors[lane].loop_var
    if lane != -1:
        fors, infos = fors[:lane], infos[:lane]
    out = []
    for f, info in reversed(list(zip(fors, infos))):
        used = [t for t in terms if _uses(t, f.loop_var)]
        if info.kind != "serial" or info.extent < 3 or not used:
            continue
        start = int(f.min)
        inside = [v for v in range(start, start + info.extent)
                  if all((ana := analyzer(f.loop_var, v)).can_prove(ana.rewrite_simplify(t)) for t in used)]
        if inside and inside[-1] - inside[0] + 1 == len(inside) and info.extent / 2 <= len(inside) < info.extent:
            out.append((info, inside[0] - start, inside[-1] + 1 - start, any(_uses(t, lane_var) for t in used)))
    return out


def _uses(expr: Any, var: tirx.Var) -> bool:
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr))


def _pad_condition(body: Any) -> Any:
    """The condition of the ``if_then_else`` a conversion block stores (a pad), or None."""
    value = getattr(body, "value", None)
    if isinstance(value, tvm.ir.Call) and str(value.op.name).endswith(".if_then_else"):
        return value.args[0]
    return None


def _conjuncts(cond: Any) -> list[Any]:
    if isinstance(cond, tirx.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def parallel_outer(b: StepBuilder, outer: list, cores: int) -> None:
    """Fuse the first of the ``outer`` loops until every core has several chunks, and run the
    fused loop in parallel (a single chunk or a single core: left serial)."""
    take, chunks = 0, 1
    while take < len(outer) and chunks < _wanted_chunks(cores):
        chunks *= outer[take].extent
        take += 1
    if take > 1:
        b.step("fuse", loops=[lp.name for lp in outer[:take]])
    if take and b.loops()[0].extent > 1 and cores > 1:
        b.step("parallel", loop=b.loops()[0].name)


def _wanted_chunks(cores: int) -> int:
    """How many chunks the parallel loop should have."""
    return cores * _CHUNKS_PER_CORE


def _vector_run(extents: Sequence[int], lanes: int) -> tuple[int, int]:
    """How many innermost loops to fuse into the vector loop, and the vector loop's width.

    The shortest run whose product is a multiple of the lanes, fusing only across loops of
    power-of-two extents (each lane's indices then come by shifts and masks: across a loop of
    3 channels, every lane computes divisions);
    failing that the innermost loop alone, vectorized whole when short or split by a divisor
    of one to four vectors."""
    prod = 1
    for k in range(1, len(extents) + 1):
        prod *= extents[-k]
        if prod % lanes == 0:
            return k, lanes
        if prod & (prod - 1):  # not a power of two: no further fusing
            break
    # the innermost loop longer than one, with the unit loops inside it (ALT's C.i of 1 after a
    # 9-wide W.w tile: vectorizing the unit loop left the stem's unfold scalar)
    units = next((k for k in range(len(extents)) if extents[-1 - k] > 1), 0)
    last = extents[-1 - units]
    if last <= _MAX_VECTORS * lanes:
        return 1 + units, last
    return 1 + units, _divisor_near(last, lanes, _MAX_VECTORS * lanes)


def _divisor_near(n: int, want: int, most: int | None = None) -> int:
    """The divisor of ``n`` in ``[want, most]`` that fills whole vectors of ``want`` best
    (``want`` itself when it divides; ``want`` with a remainder tile when none fits)."""
    most = most or 2 * want
    if n % want == 0:
        return want
    cands = [d for d in range(want, min(most, n) + 1) if n % d == 0]
    if not cands:
        return want  # rare: no divisor near; TVM predicates the remainder tile
    return max(cands, key=lambda d: (d / (math.ceil(d / want) * want), -d))


########## The source's tiles ##########

def _group_sizes(access: _Access | None, extents: Sequence[int], group: Sequence[int], width: int | None,
                 line: int) -> list[int]:
    """The extents of a loop group's pieces, outermost first. A group is cut where the source's
    tiles start (``_source_tiles``) and at cache lines: of the source along a loop it reads
    with a step under a line, of the destination in the vector group (``width``: its vector
    width, the innermost cut; narrowed to source tiles half as wide). Only cuts that nest (each
    dividing the next) are kept."""
    total = math.prod(extents[k] for k in group)
    if width is not None and total % width:
        return [math.ceil(total / width), width]  # the predicated split: a remainder vector
    cuts = []  # periods, in iterations of the group
    if access is not None and len(group) == 1:
        along = lambda v: access.source_along(group[0], v)  # noqa: E731
        cuts += list(itertools.accumulate(_source_tiles(along, total), operator.mul))
        if width is not None and cuts and cuts[0] < width and width % cuts[0] == 0 and 2 * cuts[0] >= width:
            # source tiles half a vector wide: a narrower vector reads one tile, not two
            width = cuts[0]
        d = int(abs(np.diff(along(np.arange(2, dtype=np.int64)))[0])) if total > 1 else 0
        if 0 < d < line and line % d == 0:
            cuts.append(line // d)
    if width is not None:
        cuts += [width, line]
    chain: list[int] = []
    for c in sorted(set(cuts)):
        if 1 < c < total and total % c == 0 and (chain or width is None or c == width) \
                and (not chain or c % chain[-1] == 0):
            chain.append(c)
    if width is not None and not chain and total > width:
        chain = [width]  # the vector alone (total == width: the group is the vector)
    bounds = [total, *chain[::-1], 1]
    return [a // b for a, b in zip(bounds, bounds[1:])]


def _source_tiles(source_along: Callable[[np.ndarray], np.ndarray], extent: int) -> list[int]:
    """Where a loop crosses tiles of the source, innermost level first, as the number of steps
    per tile of the level below: the step the source takes along the loop changes every ``p``
    iterations (and only there), with ``p`` dividing what is left of the loop. Padding offsets
    the boundaries from the loop's multiples: such a loop is not split (a split would not line
    up with the tiles)."""
    tiles: list[int] = []
    step, n = 1, extent
    while n > 2:
        off = np.asarray(source_along(np.arange(n, dtype=np.int64) * step))
        d = np.diff(off)
        change = np.nonzero(d != d[0])[0] + 1  # iterations that start a new tile
        if not change.size:
            break
        p = int(change[0])
        if n % p or np.any(change % p):
            break
        tiles.append(p)
        step, n = step * p, n // p
    return tiles


########## The order of the pieces ##########

@dataclass(frozen=True)
class _Piece:
    """One loop after the splits: ``group`` (the destination loops it walks: one, or the fused
    vector run), its extent, its step in the group's coordinate, and its position (outer first)."""

    group: tuple[int, ...]
    extent: int
    step: int
    pos: int


@dataclass(frozen=True)
class _Cache:
    """What the order model knows of the caches, in elements: a line; the L1's sets and ways
    (a virtually indexed L1 has a page's worth of lines per way: lines a page apart share a
    set, e.g. the rows of channel planes whose size is a multiple of the page); and the largest
    footprint it looks at (half the L2)."""

    line: int
    sets: int
    ways: int
    tile: int  # the largest tile (phase 1): the L1
    cap: int

    @staticmethod
    def of(itemsize: int) -> _Cache:
        caches, line_bytes, _ = cache_info()
        page = mmap.PAGESIZE
        l2 = caches.get("L2", max(caches.values(), default=1 << 20))
        line = max(line_bytes // itemsize, 1)
        l1 = caches.get("L1d", page * 8)
        return _Cache(line, max(page // line_bytes, 1), max(l1 // page, 1), max(l1 // itemsize, 16 * line),
                      max(l2 // (2 * itemsize), 16 * line))


def _order(pieces: Sequence[_Piece], extents: Sequence[int], access: _Access | None, cache: _Cache) -> list[_Piece]:
    """The pieces outermost first: the vector piece innermost, then outwards, greedily, in two
    phases (``_footprint`` measures what the loops inside touch):

    1. the tile (up to the L1's size): the piece that most lowers the source lines read per
       element, alone or with one more piece (``_ahead``), while one does, among those whose
       reused lines fit the L1's sets (no set holds more lines than it has ways, or than it
       held already: a 16-channel gather from NCHW planes a page apart would evict its own
       lines, so NCHW -> NCHW16c gathers 8 channels along W, then the other 8); ties go to
       fewer destination lines (the tiled output -> NCHW writes each channel's line whole, 16
       W at a time), then to fewer read runs (ALT's unfold reads 8 channel rows along W, not
       16 rows in short pieces);
    2. the streams (up to half the L2): among the pieces that lower the streams per element
       (the tile's rows grow into long runs) without reading more lines per element, the one
       that leaves the fewest streams running at once, while one does (the prefetchers follow
       only so many streams); then, where another loop would
       write lines between the lines it writes (``_dense``), the last of these pieces gives
       way to the piece that closes the gaps; and where the first of them writes its rows in
       passes, the second writes them whole (``_whole_rows``).

    The rest stays outside, in the destination's order."""
    inner = [pieces[-1]]
    rest = [p for p in pieces[:-1] if p.extent > 1]
    if access is None:
        return [p for p in pieces if p not in inner] + inner
    now = _footprint(inner, extents, access, cache)
    for phase in (0, 1):
        while rest:
            scored = [(fp, p) for p in rest if (fp := _fits(inner, p, now, phase, extents, access, cache))]
            if phase == 0:
                ahead = {p.pos: _ahead(inner, p, fp, rest, extents, access, cache) for fp, p in scored}
                scored = [(fp, p) for fp, p in scored if ahead[p.pos][0] < now.lines * (1 - _GAIN)]
                key = lambda t: (ahead[t[1].pos], t[0].reads, t[0].written, t[0].lines, -t[1].pos)  # noqa: E731
            else:
                scored = [(fp, p) for fp, p in scored
                          if fp.runs < now.runs * (1 - _GAIN) and fp.lines <= now.lines * (1 + _GAIN)]
                key = lambda t: (t[0].streams, t[0].runs, -t[1].pos)  # noqa: E731
            if not scored:
                break
            now, best = min(scored, key=key)
            inner.append(best)
            rest.remove(best)
        if phase == 0:
            tile = len(inner)
    if len(inner) > tile and (dense := _dense(inner, rest, extents, access, cache)):
        rest.append(inner.pop())
        inner.append(dense)
    if len(inner) > tile + 1 and _whole_rows(inner[:tile], inner[tile], inner[tile + 1], extents, access, cache):
        inner[tile], inner[tile + 1] = inner[tile + 1], inner[tile]
    return [p for p in pieces if p not in inner] + inner[::-1]


def _whole_rows(tile: list[_Piece], first: _Piece, second: _Piece, extents: Sequence[int], access: _Access,
                cache: _Cache) -> bool:
    """Whether the streams' two innermost pieces should trade places, for a destination larger than
    the L2: ``first`` (right outside the tile) writes its page's lines in passes (the first line of
    each row, then the second, ...), ``second`` writes each row whole, and the source runs
    ``second`` reads are still long (``_LONG_READ``). The order model counts lines of a page as
    one run of writes, and the passes cost more (ALT's tiled output -> NCHW with 4x16 tiles); with
    14x2 tiles, whole rows would read 2 lines a run, and the passes stay."""
    if math.prod(access.dst_shape) <= 2 * cache.cap:  # cap: half the L2
        # the destination stays in the L2, no prefetcher to keep up with: either order will do
        return False

    (_, passes), (fp, gaps) = (_write_gaps([*tile, p], extents, access, cache) for p in (first, second))
    size = math.prod(p.extent for p in tile) * second.extent
    return passes > 0 and not gaps and fp.lines * size >= _LONG_READ * fp.reads


def _dense(inner: list[_Piece], rest: Sequence[_Piece], extents: Sequence[int], access: _Access,
           cache: _Cache) -> _Piece | None:
    """The piece outside that, in place of ``inner``'s last, makes its destination lines whole
    runs of adjacent lines, where they are not: a loop outside half the L2 writing the lines
    between them writes each row in passes over the whole buffer (the 7x7/2 stem's output from
    14x2 tiles, its W blocks outside the channel and H blocks). None when they are runs already
    or no piece fits."""
    if not _write_gaps(inner, extents, access, cache)[1]:
        return None
    keep = inner[:-1]
    fits = [q for q in rest if math.prod(p.extent for p in keep) * q.extent <= cache.cap]
    found = [(fp.streams, q) for q in fits for fp, gaps in [_write_gaps([*keep, q], extents, access, cache)]
             if not gaps]
    return min(found, key=lambda t: (t[0], -t[1].pos))[1] if found else None


def _write_gaps(pieces: Sequence[_Piece], extents: Sequence[int], access: _Access,
                cache: _Cache) -> tuple[_Footprint, int]:
    """The footprint of ``pieces`` and how many more runs of writes it makes when a run is adjacent
    lines than when it is lines within a page (0: its rows are written whole, not in passes)."""
    fp = _footprint(pieces, extents, access, cache)
    return fp, _footprint(pieces, extents, access, cache, dense=True).writes - fp.writes


def _fits(inner: list[_Piece], p: _Piece, now: _Footprint, phase: int, extents: Sequence[int], access: _Access,
          cache: _Cache) -> _Footprint | None:
    """The footprint with ``p`` outside ``inner``, or None if it is too large (or, for the tile,
    ``phase`` 0, if its live lines overflow an L1 set)."""
    if math.prod(q.extent for q in inner) * p.extent > (cache.cap if phase else cache.tile):
        return None
    fp = _footprint([*inner, p], extents, access, cache)
    return fp if phase or fp.load <= max(cache.ways, now.load) else None


def _ahead(inner: list[_Piece], p: _Piece, fp: _Footprint, rest: Sequence[_Piece], extents: Sequence[int],
           access: _Access, cache: _Cache) -> tuple[float, float]:
    """The fewest lines per element of the tile with ``p``, or with ``p`` and one more piece (a
    piece that looks best alone can block the piece that would complete the lines: 16
    channels of half lines, a page apart, cannot wait for their other halves), then the
    fewest destination lines."""
    after = [f for q in rest if q is not p and (f := _fits([*inner, p], q, fp, 0, extents, access, cache))]
    return min((f.lines, f.written) for f in [fp, *after])


def _traffic(order: Sequence[_Piece], extents: Sequence[int], access: _Access, cache: _Cache) -> float:
    """Source lines read per element by the pieces in ``order`` (outermost first), where the L1
    keeps what the loops inside the first loop that overflows it touched: that loop's next
    iteration reads only the lines its last one did not (a window sliding 4 floats of its 9
    rereads 3/4 of its lines), whatever order the loops inside take."""
    inner = [p for p in reversed(order) if p.extent > 1]
    lines_l1 = cache.tile // cache.line
    fp, size, j = None, 1, 0
    while j < len(inner) and size * inner[j].extent <= cache.cap:
        nxt = _footprint(inner[:j + 1], extents, access, cache)
        if fp is not None and (nxt.lines + nxt.written) * size * inner[j].extent > lines_l1:
            break
        fp, size, j = nxt, size * inner[j].extent, j + 1
    if fp is None:
        return 1.0
    k = min(inner[j].extent, cache.cap // size) if j < len(inner) else 1
    if k < 2:
        return fp.lines
    # the lines the next k - 1 iterations add, averaged (the window's lines do not all start
    # where its first iteration does)
    steps = _footprint([*inner[:j], replace(inner[j], extent=k)], extents, access, cache)
    return (steps.lines * k - fp.lines) / (k - 1)


def _scatters(order: Sequence[_Piece], extents: Sequence[int], access: _Access, cache: _Cache) -> bool:
    """Whether the two innermost loops of ``order`` (outermost first) write fewer than
    ``_SHORT`` lines to each page they write, on several pages."""
    inner = [p for p in reversed(order) if p.extent > 1][:2]
    if len(inner) < 2:
        return False
    fp = _footprint(inner, extents, access, cache)
    return fp.pages > 1 and fp.written * inner[0].extent * inner[1].extent < _SHORT * fp.pages


@dataclass(frozen=True)
class _Footprint:
    """What the loops inside some loop touch: source lines per element (``lines``; the
    destination's: ``written``); ``streams``, the runs of consecutive lines read plus
    ``_WRITE_RUN`` per run of writes (lines within a page of each other: writes land in the
    caches and leave them as whole lines), all at once (per element: ``runs``; the read runs
    alone: ``reads``, the write runs: ``writes``); ``load``, the most lines of one buffer that must stay in one L1 set
    while the outermost of those loops runs (the lines its iterations share, and those of its
    first iteration); ``pages``, the destination pages written."""

    lines: float
    written: float
    streams: float
    runs: float
    reads: int
    writes: int
    load: int
    pages: int


def _footprint(pieces: Sequence[_Piece], extents: Sequence[int], access: _Access, cache: _Cache,
               dense: bool = False) -> _Footprint:
    """The footprint of ``pieces`` (innermost first; the other loops at 0); with ``dense``, a run
    of writes is adjacent lines, else lines within a page of each other."""
    n = len(pieces)
    coords: dict[tuple[int, ...], Any] = {}
    for j, p in enumerate(pieces):
        v = np.arange(p.extent, dtype=np.int64).reshape([-1 if i == j else 1 for i in range(n)]) * p.step
        coords[p.group] = coords.get(p.group, 0) + v
    values: list[Any] = [0] * len(extents)
    for group, c in coords.items():  # a fused group's coordinate back to its loops
        for k in reversed(group):
            values[k], c = c % extents[k], c // extents[k]
    shape = [p.extent for p in pieces]
    size = math.prod(shape)
    found = []  # per side: lines touched, runs, the most live lines in one set
    for off, gap in zip(access.offsets(values), (1, 1 if dense else cache.sets)):  # the source, the destination
        per = np.broadcast_to(off, shape) // cache.line
        touched = _distinct(per)
        runs = 1 + np.count_nonzero(np.diff(touched) > gap)
        # the outermost loop's iterations (the last axis): lines shared by several stay live
        live = touched
        if n > 1:
            it = np.arange(shape[-1], dtype=np.int64)
            pairs = _distinct(per * shape[-1] + it) // shape[-1]  # (line, iteration), each once
            shared = pairs[1:][pairs[1:] == pairs[:-1]]  # sorted: a line again is another iteration's
            live = _distinct(np.concatenate([shared, per[..., 0].ravel()]))
        # per side: where the two buffers start relative to each other is not known
        found.append((touched.size, runs, int(np.bincount(live % cache.sets).max())))
    (src_lines, reads, src_load), (dst_lines, writes, dst_load) = found
    streams = reads + _WRITE_RUN * writes
    pages = _distinct(touched // cache.sets).size  # touched: the destination's lines
    return _Footprint(src_lines / size, dst_lines / size, streams, streams / size, reads, int(writes),
                      max(src_load, dst_load), pages)


def _distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, sorted (NumPy's hashing ``unique`` is slower on these)."""
    a = np.sort(a, axis=None)
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if a.size else a


########## Where the block reads and writes ##########

class _Unreadable(Exception):
    """An index expression the NumPy evaluator does not know."""


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "FloorDiv": np.floor_divide, "FloorMod": np.mod,
    "Min": np.minimum, "Max": np.maximum}


def _evaluate(expr: Any, env: Mapping[str, Any]) -> Any:
    """An integer TIR expression of the block's variables, on NumPy arrays (broadcast)."""
    kind = type(expr).__name__
    if kind == "IntImm":
        return int(expr.value)
    if kind == "Var":
        return env[expr.name]
    if kind in _BINARY:
        return _BINARY[kind](_evaluate(expr.a, env), _evaluate(expr.b, env))
    if kind == "Cast":
        return _evaluate(expr.value, env)
    raise _Unreadable(kind)


def _flat(indices: Sequence[Any], shape: Sequence[int], env: Mapping[str, Any]) -> Any:
    flat: Any = 0
    for i, n in zip(indices, shape):
        flat = flat * n + _evaluate(i, env)
    return flat


@dataclass(frozen=True)
class _Access:
    """Where a conversion block reads (its one source) and writes, as flat element offsets of
    its loops' values (``offsets``), from the block's own index expressions."""

    names: tuple[str, ...]  # the block variable of each loop, outermost first
    src: tuple[Any, ...]
    src_shape: tuple[int, ...]
    dst: tuple[Any, ...]
    dst_shape: tuple[int, ...]
    itemsize: int

    @staticmethod
    def of(func: tirx.PrimFunc, block: str, loops: Sequence[LoopInfo]) -> _Access | None:
        """The block's accesses; None when they cannot be evaluated (then the pieces keep the
        destination's order)."""
        realize = block_nest(func, block)[0]
        loads: list[Any] = []  # 0.27's loads are TensorLoad nodes (their buffer is ``source``)
        stores: list[Any] = []
        visit_nodes(realize.block.body, lambda n: loads.append(n) if type(n).__name__ in ("BufferLoad", "TensorLoad")
                    else stores.append(n) if type(n).__name__ == "BufferStore" else None)
        # the unscheduled block binds each of its variables to one loop
        bound = {v.name: iv.var.name for v, iv in zip(realize.iter_values, realize.block.iter_vars)
                 if isinstance(v, tirx.Var)}
        if not loads or len(stores) != 1 or any(lp.name not in bound for lp in loops):
            return None
        # a conversion block reads its one input (twice at most: under a padding guard)
        load, store = loads[0], stores[0]
        src = load.source if hasattr(load, "source") else load.buffer
        try:
            itemsize = np.dtype(str(store.buffer.dtype)).itemsize
        except TypeError:
            itemsize = 4
        access = _Access(tuple(bound[lp.name] for lp in loops), tuple(load.indices), tuple(int(n) for n in src.shape),
                         tuple(store.indices), tuple(int(n) for n in store.buffer.shape), itemsize)
        try:
            access.offsets([0] * len(loops))
        except (_Unreadable, KeyError):
            return None
        return access

    def offsets(self, values: Sequence[Any]) -> tuple[Any, Any]:
        """Source and destination offsets (elements) at these loop values (arrays broadcast)."""
        env = dict(zip(self.names, values))
        return _flat(self.src, self.src_shape, env), _flat(self.dst, self.dst_shape, env)

    def source_along(self, k: int, v: np.ndarray) -> np.ndarray:
        """Source offsets along loop ``k`` (the others at 0)."""
        values: list[Any] = [0] * len(self.names)
        values[k] = v
        return np.broadcast_to(self.offsets(values)[0], v.shape)


########## Measuring ##########

@dataclass(frozen=True)
class Bandwidth:
    """A conversion kernel's measured rate: bytes read + written per second, against the copy
    bandwidth of the machine (``ceilings.copy_gbs``)."""

    kernel: str
    bytes: int
    ms: float
    gbs: float
    copy_gbs: float

    @property
    def of_copy(self) -> float:
        """The fraction of the STREAM copy bandwidth reached (1.0 = as fast as a copy)."""
        return self.gbs / self.copy_gbs if self.copy_gbs > 0 else 0.0


def default_steps(prog: Any, kernel: str, target: Mapping) -> list[Step] | None:
    """The schedule kernel ``kernel`` of ``prog`` (a ``program.Program``) gets when nothing else
    schedules it: ``conversion_steps`` for a stand-alone conversion, None for any other kernel."""
    k = next((k for k in prog.plan.kernels if k.name == kernel), None)
    return None if k is None or k.conversion is None else conversion_steps(prog.funcs[kernel], kernel, target)


def scheduled_conversions(prog: Any, target: Mapping) -> dict[str, tirx.PrimFunc]:
    """Every stand-alone conversion kernel of ``prog`` after its ``default_steps``: what a
    session builds when it has no schedule of its own for them."""
    return {k.name: apply_steps(prog.funcs[k.name], default_steps(prog, k.name, target)).mod["main"]
            for k in prog.plan.kernels if k.conversion is not None}


def conversion_ms(func: tirx.PrimFunc, target: Mapping, steps: Sequence[Step] | None = None,
                  kernel: str = "conversion", min_s: float = 0.2) -> tuple[float, int]:
    """Build ``func`` (after ``steps``; default ``conversion_steps``) and time it on random data:
    the best of 5 repeats of at least ``min_s`` / 5 seconds each, in ms, and the bytes its
    buffers hold (every input read once, every output written once)."""
    steps = conversion_steps(func, kernel, target) if steps is None else steps
    sch = apply_steps(func, steps)
    lib = codegen.compile(tvm.IRModule({"main": sch.mod["main"]}), target).jit()
    rng = np.random.default_rng(0)
    host = [rng.random([int(n) for n in p.shape], dtype=np.float32) for p in func.params]
    nbytes = sum(x.nbytes for x in host)
    args = [tvm.runtime.tensor(x) for x in host]
    fn = lib["main"]
    fn(*args)  # warm-up
    t0 = time.perf_counter()
    fn(*args)
    one = max(time.perf_counter() - t0, 1e-6)
    number = max(1, int(min_s / 5 / one))
    ev = lib.time_evaluator("main", tvm.cpu(), number=number, repeat=5)
    return min(float(x) for x in ev(*args).results) * 1e3, nbytes


def conversion_bandwidth(func: tirx.PrimFunc, target: Mapping, steps: Sequence[Step] | None = None,
                         kernel: str = "conversion", min_s: float = 0.2) -> Bandwidth:
    """``conversion_ms``'s timing as a rate, compared with the copy bandwidth of ``target`` on
    this machine (``ceilings.get_ceilings``, measured once).

    Bytes = every input buffer read once + every output buffer written once: an unfold's halo
    is counted once on the read side (what the source holds) and in full on the write side."""
    ms, nbytes = conversion_ms(func, target, steps, kernel, min_s)
    return Bandwidth(kernel, nbytes, ms, nbytes / ms / 1e6, get_ceilings(target).copy_gbs)
