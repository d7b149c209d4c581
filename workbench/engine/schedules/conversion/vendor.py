"""CPU-specific rules of the conversion schedules, by the target's LLVM CPU name: which targets
move gathered rows through register tiles (``register_tiles``, ordered for ``order_lanes``), and
where the destination's order replaces the order model's (``keeps_destination_order``)."""

from __future__ import annotations

from typing import Mapping, Sequence

from ...build.targets import resolve_target
from .offsets import CopyAccess
from .pieces import Piece
from .traffic import Cache, footprint, traffic

__all__ = ["keeps_destination_order", "order_lanes", "register_tiles"]

#: the least vector lanes for which a gathered destination row goes through register tiles on any
#: CPU (AVX-512: LLVM builds a 16-float gather from 15 in-lane inserts)
_TILE_GATHER_LANES = 16
#: the least vector lanes for register tiles on the other CPUs (AVX2's 8), but those of
#: ``_TILE_AVERSE``, where the tiles do not beat the order model's gather (measured:
#: benchmarks/results/2026-11-27-avx2-tiles)
_TILE_LANES = 8
_TILE_AVERSE = ("znver",)
#: on the CPUs of ``_SCATTER_AVERSE``, where the model's order writes fewer than ``_SHORT`` lines
#: to each page in its innermost two loops, the destination's order (one sequential stream of
#: writes) replaces it unless it reads more than ``_TIE`` more lines: AMD's Zen loses more to
#: writes scattered over many pages than to extra reads; Intel's CPUs do not.
_SHORT = 2
_TIE = 0.05
_SCATTER_AVERSE = ("znver",)


def _cpu_is(target: Mapping, prefixes: tuple[str, ...]) -> bool:
    """Whether ``target``'s CPU (its LLVM ``mcpu``, the host's where it names none) starts with
    one of ``prefixes``."""
    return str(resolve_target(target).get("mcpu", "")).startswith(prefixes)


def register_tiles(target: Mapping, lanes: int) -> bool:
    """Whether gathered destination rows may go through register tiles (``transpose.tile_transpose``)
    on ``target``, whose vectors have ``lanes`` lanes."""
    return lanes >= _TILE_GATHER_LANES or (lanes >= _TILE_LANES and not _cpu_is(target, _TILE_AVERSE))


def order_lanes(lanes: int, line: int) -> int:
    """The vector width the order model orders for where rows go through register tiles: under
    ``_TILE_GATHER_LANES`` a line-wide vector (AVX-512's 16 fp32), so that the tile's rows write
    whole lines (ordered for 8 lanes, a line's W pieces fall outside its rows)."""
    return max(lanes, line) if lanes < _TILE_GATHER_LANES else lanes


def keeps_destination_order(target: Mapping, pieces: Sequence[Piece], order: Sequence[Piece],
                            extents: Sequence[int], access: CopyAccess, cache: Cache) -> bool:
    """Whether the destination's order (``pieces``) replaces the order model's (``order``) on
    ``target``: see ``_SCATTER_AVERSE``."""
    return _cpu_is(target, _SCATTER_AVERSE) and _scatters(order, extents, access, cache) and \
        traffic(pieces, extents, access, cache) <= traffic(order, extents, access, cache) * (1 + _TIE)


def _scatters(order: Sequence[Piece], extents: Sequence[int], access: CopyAccess, cache: Cache) -> bool:
    """Whether the two innermost loops of ``order`` (outermost first) write fewer than
    ``_SHORT`` lines to each page they write, on several pages."""
    inner = [p for p in reversed(order) if p.extent > 1][:2]
    if len(inner) < 2:
        return False
    fp = footprint(inner, extents, access, cache)
    return fp.pages > 1 and fp.written * inner[0].extent * inner[1].extent < _SHORT * fp.pages
