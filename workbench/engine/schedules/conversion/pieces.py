"""How a conversion's loops are cut into pieces (``Piece``): the innermost loops fused into the
vector run (``vector_run``), and each loop group cut where the source's tiles start and at
cache lines (``group_sizes``, ``source_tiles``)."""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .offsets import CopyAccess

__all__ = ["MAX_VECTORS", "Piece", "divisor_near", "group_sizes", "source_tiles", "vector_run"]

#: widest vector loop, in vectors, for a run that does not divide the lanes
MAX_VECTORS = 4


@dataclass(frozen=True)
class Piece:
    """One loop after the splits: ``group`` (the destination loops it walks: one, or the fused
    vector run), its extent, its step in the group's coordinate, and its position (outer first)."""

    group: tuple[int, ...]
    extent: int
    step: int
    pos: int


def vector_run(extents: Sequence[int], lanes: int) -> tuple[int, int]:
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
    # 9-wide W.w tile: vectorizing the unit loop would leave the stem's unfold scalar)
    units = next((k for k in range(len(extents)) if extents[-1 - k] > 1), 0)
    last = extents[-1 - units]
    if last <= MAX_VECTORS * lanes:
        return 1 + units, last
    return 1 + units, divisor_near(last, lanes, MAX_VECTORS * lanes)


def divisor_near(n: int, want: int, most: int | None = None) -> int:
    """The divisor of ``n`` in ``[want, most]`` that fills whole vectors of ``want`` best
    (``want`` itself when it divides; ``want`` with a remainder tile when none fits)."""
    most = most or 2 * want
    if n % want == 0:
        return want
    cands = [d for d in range(want, min(most, n) + 1) if n % d == 0]
    if not cands:
        return want  # rare: no divisor near; TVM predicates the remainder tile
    return max(cands, key=lambda d: (d / (math.ceil(d / want) * want), -d))


def group_sizes(access: CopyAccess | None, extents: Sequence[int], group: Sequence[int], width: int | None,
                line: int) -> list[int]:
    """The extents of a loop group's pieces, outermost first. A group is cut where the source's
    tiles start (``source_tiles``) and at cache lines: of the source along a loop it reads
    with a step under a line, of the destination in the vector group (``width``: its vector
    width, the innermost cut; narrowed to source tiles half as wide). Only cuts that nest (each
    dividing the next) are kept."""
    total = math.prod(extents[k] for k in group)
    if width is not None and total % width:
        return [math.ceil(total / width), width]  # the predicated split: a remainder vector
    cuts = []  # periods, in iterations of the group
    if access is not None and len(group) == 1:
        along = lambda v: access.source_along(group[0], v)  # noqa: E731
        cuts += list(itertools.accumulate(source_tiles(along, total), operator.mul))
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


def source_tiles(source_along: Callable[[np.ndarray], np.ndarray], extent: int) -> list[int]:
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
