"""The cache-traffic model of a conversion's loop order, on the caches it knows (``Cache``):
what the loops inside some loop touch (``footprint``: source and destination lines per element,
runs of reads and writes, lines live in one L1 set, pages written), and the source lines an
order reads per element (``traffic``)."""

from __future__ import annotations

import math
import mmap
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ...measure.ceilings import cache_info
from .offsets import CopyAccess
from .pieces import Piece

__all__ = ["Cache", "Footprint", "footprint", "traffic"]

#: what a run of writes weighs against a run of reads: a read that misses stalls the core
#: until the prefetcher follows the run; writes wait in the store buffer and the caches
_WRITE_RUN = 0.5


@dataclass(frozen=True)
class Cache:
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
    def of(itemsize: int) -> Cache:
        caches, line_bytes, _ = cache_info()
        page = mmap.PAGESIZE
        l2 = caches.get("L2", max(caches.values(), default=1 << 20))
        line = max(line_bytes // itemsize, 1)
        l1 = caches.get("L1d", page * 8)
        return Cache(line, max(page // line_bytes, 1), max(l1 // page, 1), max(l1 // itemsize, 16 * line),
                      max(l2 // (2 * itemsize), 16 * line))


@dataclass(frozen=True)
class Footprint:
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


def footprint(pieces: Sequence[Piece], extents: Sequence[int], access: CopyAccess, cache: Cache,
              dense: bool = False) -> Footprint:
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
    return Footprint(src_lines / size, dst_lines / size, streams, streams / size, reads, int(writes),
                      max(src_load, dst_load), pages)


def _distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, sorted (NumPy's hashing ``unique`` is slower on these)."""
    a = np.sort(a, axis=None)
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if a.size else a


def traffic(order: Sequence[Piece], extents: Sequence[int], access: CopyAccess, cache: Cache) -> float:
    """Source lines read per element by the pieces in ``order`` (outermost first), where the L1
    keeps what the loops inside the first loop that overflows it touched: that loop's next
    iteration reads only the lines its last one did not (a window sliding 4 floats of its 9
    rereads 3/4 of its lines), whatever order the loops inside take."""
    inner = [p for p in reversed(order) if p.extent > 1]
    lines_l1 = cache.tile // cache.line
    fp, size, j = None, 1, 0
    while j < len(inner) and size * inner[j].extent <= cache.cap:
        nxt = footprint(inner[:j + 1], extents, access, cache)
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
    steps = footprint([*inner[:j], replace(inner[j], extent=k)], extents, access, cache)
    return (steps.lines * k - fp.lines) / (k - 1)
