"""Analytic schedules for layout-conversion kernels: a conversion moves memory and computes
nothing, so its schedule aims at the copy bandwidth (STREAM's copy, ``ceilings.copy_gbs``).

``conversion_steps(func, kernel, target)`` plans the schedule as the session's own ``loop``
steps, from the kernel's single block (its loops run over the destination's stored shape): a
plain transpose goes through register tiles (``transpose``); otherwise the loops are cut into
pieces (``pieces``), ordered by the cache-traffic model (``order``, ``traffic``; CPU rules in
``vendor``), the outer ones run in parallel and the vector run vectorized; gathered rows go
through register tiles or a tile buffer (``tile_buffer``), interleaved rows are vectorized along
the rows (``interleaving``) and padded reads are cut into border and interior ranges
(``borders``). ``bandwidth`` times a conversion kernel.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from tvm import tirx

from ...base.errors import LoopError
from ...loops.primitives import list_blocks, list_loops
from ...base.step import Step
from ...build.targets import target_cores, vector_unit
from .borders import borders
from ..builder import StepBuilder, parallel_outer, wanted_chunks
from .interleaving import interleave, interleaves
from .offsets import CopyAccess
from .order import order_pieces
from .pieces import Piece, group_sizes, vector_run
from .tile_buffer import rows_across_tiles, through_buffer
from .traffic import Cache
from .transpose import far_block, tile_transpose, transpose_steps, transposed
from .vendor import keeps_destination_order, order_lanes, register_tiles

__all__ = ["conversion_steps"]

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
        ``loop`` steps that ``loops.apply.apply_steps(func, steps)`` applies.

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
    access = CopyAccess.of(func, block, loops)
    cache = Cache.of(access.itemsize if access else 4)
    extents = [lp.extent for lp in loops]
    if access is not None and (transpose := transposed(access, extents)) and \
            (steps := transpose_steps(func, kernel, block, transpose, cores,
                                      far_block(access, extents, transpose, cache.line))):
        return steps
    tiles = access is not None and register_tiles(target, lanes)
    wide = order_lanes(lanes, cache.line) if tiles else lanes
    b, order = _ordered(func, kernel, block, extents, access, cache, wide, cores, target)
    if tiles and (steps := tile_transpose(func, kernel, block, b, order, access, cache.line)):
        return steps
    if wide != lanes:
        b, order = _ordered(func, kernel, block, extents, access, cache, lanes, cores, target)
    across = access is not None and rows_across_tiles(access, extents, cache)
    if not across and interleaves(access, [lp.name for lp in loops], b.loops(), lanes, cache.line):
        interleave(b, lanes)
        return b.steps
    # 4. vectorize the innermost loop
    b.step("vectorize", loop=b.loops()[-1].name)
    # 5. rows gathered across the source's tiles go through a buffer, written back whole;
    # else a padded read's borders apart from its interior
    if across:
        through_buffer(b, cache, lanes)
    else:
        borders(b)
    return b.steps


def _ordered(func: tirx.PrimFunc, kernel: str, block: str, extents: Sequence[int], access: CopyAccess | None,
             cache: Cache, lanes: int, cores: int, target: Mapping) -> tuple[StepBuilder, list[Piece]]:
    """The order model's schedule for vectors of ``lanes``: its steps so far (a builder: the
    vector run fused, the splits, the order, the parallel loop) and the pieces in their order."""
    run, width = vector_run(extents, lanes)
    groups = [(k,) for k in range(len(extents) - run)] + [tuple(range(len(extents) - run, len(extents)))]
    sizes = [group_sizes(access, extents, g, width if i == len(groups) - 1 else None, cache.line)
             for i, g in enumerate(groups)]
    b = StepBuilder(func, kernel, block)

    # 1. the vector run fused; every group split at the source's tiles (the run by the lanes too)
    if run > 1:
        b.step("fuse", loops=[lp.name for lp in b.loops()[-run:]])
    for i in reversed(range(len(groups))):  # innermost first: the outer loops keep their places
        if len(sizes[i]) > 1:
            b.step("split", loop=b.loops()[i].name, factors=[None, *sizes[i][1:]])
    pieces: list[Piece] = []
    for g, sz in zip(groups, sizes):
        pieces += [Piece(g, ext, math.prod(sz[j + 1:]), len(pieces) + j) for j, ext in enumerate(sz)]
    # 2. the order: the vector piece innermost, then the cheapest footprint outwards
    order = order_pieces(pieces, extents, access, cache)
    if access is not None and keeps_destination_order(target, pieces, order, extents, access, cache):
        order = pieces  # as few lines read, and the writes in one sequential stream
    # 3. parallel outer loops, none that splits the destination's lines between threads
    order, shared = _whole_lines_apart(order, extents, cache, cores)
    if [p.pos for p in order] != list(range(len(pieces))):
        names = [lp.name for lp in b.loops()]
        b.step("reorder", loops=[names[p.pos] for p in order])
    parallel_outer(b, b.loops()[:shared], cores)
    return b, order


def _whole_lines_apart(order: list[Piece], extents: Sequence[int], cache: Cache,
                       cores: int) -> tuple[list[Piece], int]:
    """``order`` with the outer pieces of the destination's rows (of its innermost loop) that
    step less than a line moved inside the loops that ``parallel_outer`` runs in parallel, and
    how many loops it may fuse: each parallel chunk then writes whole rows, not a column of
    pieces a few floats wide, which threads would share line by line. Pieces of other loops stay
    (a stem unfold's 9-float rows are whole rows already)."""
    head: list[Piece] = []
    later: list[Piece] = []
    chunks = 1
    row = len(extents) - 1
    for p in order[:-1]:
        if chunks >= wanted_chunks(cores):
            break
        # (the destination's innermost loop: its pieces' steps are destination elements)
        if p.extent > 1 and row in p.group and p.step < cache.line:
            later.append(p)
        else:
            head.append(p)
            chunks *= p.extent
    if not later or chunks < wanted_chunks(cores):
        return order, len(order) - 1  # (too few whole-row chunks: the model's order stays)
    return head + later + [p for p in order if p not in head and p not in later], len(head)

