"""The order model: a conversion's pieces ordered outermost first, greedily, by the cache
traffic of the loops inside each (``traffic.footprint``): first the tile that fits the L1, then
the streams up to half the L2 (``order_pieces``)."""

from __future__ import annotations

import math
from typing import Sequence

from .offsets import CopyAccess
from .pieces import Piece
from .traffic import Cache, Footprint, footprint

__all__ = ["order_pieces"]

#: the least relative gain for which the order model takes one more loop into its tile
_GAIN = 0.01
#: the fewest lines a run of the source's lines holds, on average, for ``_whole_rows`` to write rows
#: whole instead of in passes (16 lines, 1 KiB: the prefetcher follows such runs; at 2 lines a run it
#: does not)
_LONG_READ = 16


def order_pieces(pieces: Sequence[Piece], extents: Sequence[int], access: CopyAccess | None,
                 cache: Cache) -> list[Piece]:
    """The pieces outermost first: the vector piece innermost, then outwards, greedily, in two
    phases (``footprint`` measures what the loops inside touch):

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
    now = footprint(inner, extents, access, cache)
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


def _whole_rows(tile: list[Piece], first: Piece, second: Piece, extents: Sequence[int], access: CopyAccess,
                cache: Cache) -> bool:
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


def _dense(inner: list[Piece], rest: Sequence[Piece], extents: Sequence[int], access: CopyAccess,
           cache: Cache) -> Piece | None:
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


def _write_gaps(pieces: Sequence[Piece], extents: Sequence[int], access: CopyAccess,
                cache: Cache) -> tuple[Footprint, int]:
    """The footprint of ``pieces`` and how many more runs of writes it makes when a run is adjacent
    lines than when it is lines within a page (0: its rows are written whole, not in passes)."""
    fp = footprint(pieces, extents, access, cache)
    return fp, footprint(pieces, extents, access, cache, dense=True).writes - fp.writes


def _fits(inner: list[Piece], p: Piece, now: Footprint, phase: int, extents: Sequence[int], access: CopyAccess,
          cache: Cache) -> Footprint | None:
    """The footprint with ``p`` outside ``inner``, or None if it is too large (or, for the tile,
    ``phase`` 0, if its live lines overflow an L1 set)."""
    if math.prod(q.extent for q in inner) * p.extent > (cache.cap if phase else cache.tile):
        return None
    fp = footprint([*inner, p], extents, access, cache)
    return fp if phase or fp.load <= max(cache.ways, now.load) else None


def _ahead(inner: list[Piece], p: Piece, fp: Footprint, rest: Sequence[Piece], extents: Sequence[int],
           access: CopyAccess, cache: Cache) -> tuple[float, float]:
    """The fewest lines per element of the tile with ``p``, or with ``p`` and one more piece (a
    piece that looks best alone can block the piece that would complete the lines: 16
    channels of half lines, a page apart, cannot wait for their other halves), then the
    fewest destination lines."""
    after = [f for q in rest if q is not p and (f := _fits([*inner, p], q, fp, 0, extents, access, cache))]
    return min((f.lines, f.written) for f in [fp, *after])
