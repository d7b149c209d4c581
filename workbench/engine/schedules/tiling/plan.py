"""The register tile of the expert template, from the target (``plan``): the vector loop (no
input gathered along it), the rows loop (the vector operand shared by every row, or sliding along
a reduction loop), the tile ``rows x nvec`` that fits the registers and covers the FMA latency,
and the inner reduction loop and its block (``Tile``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ...base.errors import LoopError
from ...build.targets import VectorUnit
from .analysis import RUN_CAP, Analysis, vector_reads

__all__ = ["MAX_STREAMS", "MIN_ACCUMULATORS", "Tile", "gathers", "plan"]

#: accumulators that cover the FMA latency (2 FMA ports x 4 cycles on Zen 3 and Skylake)
MIN_ACCUMULATORS = 8
# one load per cycle, not two: broadcast-heavy tiles are bound by their loads, not their FMAs
_FMA_PORTS, _FMA_LATENCY, _LOAD_PORTS = 2, 4, 1
#: most vectors per tile row: more only shortens the rows, as the register rule bounds both
_MAX_NVEC = 4
#: most taps of a sliding reduction loop to unroll inside the rows
_MAX_TAPS = 7
#: widest stride (in elements) of a gather whose lanes count as loads of their own
_NEAR_GATHER = 4
#: most rows of a tile whose rows each stream their own part of a read used once (a matrix-vector
#: product's packed weight): such rows share no loads, and each adds a stream from memory; more
#: than a few streams run far below the copy bandwidth (a decode GEMV: 22 rows 2.7 ms, 4 rows 0.9)
MAX_STREAMS = 4


@dataclass(frozen=True)
class Tile:
    """The register tile: ``rows`` (of loop ``rows_loop``) x ``nvec`` vectors of ``lanes`` (of
    loop ``vector``); the inner reduction loop ``inner`` split by ``kc`` (0: not split)."""

    vector: str
    lanes: int
    nvec: int
    rows_loop: str | None
    rows: int
    inner: str | None
    kc: int
    #: a reduction loop along which the vector operand slides as along the rows (a conv's ``kh``
    #: beside output rows ``h``): run inside the rows and unrolled, row ``r`` at tap ``k`` loads
    #: what row ``r + 1`` loads at ``k - 1``, so the rows and taps share their loads
    slide: str | None = None

    @property
    def accumulators(self) -> int:
        return self.rows * self.nvec


def _divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


def _lanes(width: int, extent: int, lanes: int, whole: bool = False) -> int:
    """Vector lanes along a loop whose contiguous run is ``width``: a full register when the run
    allows, never a vector across a layout block (``width < extent``). With ``whole`` (no rows
    share the vector operand's loads, no read gathers along the row), a whole row that does not
    divide into registers (28 floats on 8 lanes) is one vector of its length, at most
    ``_MAX_NVEC`` registers, which LLVM splits into full registers and one narrower (3 x 8 + 4).
    Where rows share the loads (a grouped, dilated or 3-D conv, 28 wide) or the row gathers (a
    depthwise conv of stride 2), the narrower lanes with more rows do better."""
    if width < lanes or extent < lanes:
        return min(width, extent)
    if width % lanes == 0:
        return lanes
    if whole and width == extent and extent <= _MAX_NVEC * lanes:
        return extent
    d = _divisor_at_most(width, lanes)
    return d if d * 2 >= lanes or width < extent else lanes  # a full vector with a guarded tail


def _vector_loop(a: Analysis, lanes: int) -> tuple[str, int]:
    """The loop to vectorize and its contiguous run."""
    best: tuple[Any, str, int] | None = None
    for lp in a.spatial:
        if lp.extent == 1:
            continue
        width = min(lp.extent, lanes)
        kinds = [r.kind(lp.name, width) for r in a.reads]
        contiguous = [r.runs[lp.name] for r in a.reads if r.kind(lp.name, width) == "contiguous"]
        out_unit = a.write.strides.get(lp.name) == 1
        if out_unit:
            contiguous.append(a.write.runs[lp.name])
        run = min(contiguous + [lp.extent]) if contiguous else lp.extent
        key = (-kinds.count("gather"), bool(contiguous), min(run, lanes), out_unit, lp.extent)
        if best is None or key > best[0]:
            best = (key, lp.name, run)
    if best is None:
        raise LoopError("the complex op has no spatial loop longer than 1: nothing to vectorize")
    return best[1], best[2]


def gathers(a: Analysis, lanes: int) -> bool:
    """Whether the vector loop the template would pick gathers one of its reads."""
    vector, _ = _vector_loop(a, lanes)
    return any(r.kind(vector, min(a.extent(vector), lanes)) == "gather" for r in a.reads)


def _rows_loop(a: Analysis, vector: str) -> str | None:
    """The spatial loop whose rows share the vector operand's loads."""
    vreads = vector_reads(a, vector)
    rank = {name: -abs(s) if s else -math.inf for name, s in a.write.strides.items()}  # nearer the output's inner dim
    cands = [lp for lp in a.spatial if lp.name != vector and lp.extent > 1]
    if not cands:
        return None
    return max(cands, key=lambda lp: (sum(r.strides.get(lp.name) == 0 for r in vreads),
                                      min(lp.extent, MIN_ACCUMULATORS), rank[lp.name], lp.extent)).name


def _fill(extent: int, tile: int) -> float:
    return extent / (math.ceil(extent / tile) * tile)


@dataclass(frozen=True)
class _Loads:
    """Loads per reduction step of a ``rows x nvec`` tile, by how each read moves along the rows:
    vector reads the rows share (a GEMM's B), that slide along a reduction loop of ``taps`` steps
    (a depthwise conv's input along ``h`` and ``kh``) or that each row loads anew; broadcast reads
    that change per row (a GEMM's A) or not (a depthwise conv's weight)."""

    shared: int = 1
    sliding: int = 0
    taps: int = 1
    own: int = 0
    row_broadcasts: int = 1
    broadcasts: int = 0
    #: rows that share one load of a shared read (a grouped conv's input: the group's channels)
    shared_run: int = RUN_CAP
    #: loads per vector of the shared reads: its lanes when they gather (a stride-2 conv's input)
    gather: int = 1

    def count(self, rows: int, vectors: int) -> float:
        per_row = self.own * rows + self.sliding * (rows + self.taps - 1) / self.taps
        shared = self.shared * math.ceil(rows / self.shared_run) * self.gather
        return vectors * (shared + per_row) + self.row_broadcasts * rows + self.broadcasts

    def live(self, rows: int, vectors: int) -> int:
        """Registers the loads hold beside the accumulators: the shared vectors, a sliding read's
        window of rows (but the last, used at once) and one broadcast."""
        window = self.sliding * (rows + self.taps - 2) if self.taps > 1 else 0
        return vectors * max(1, self.shared + window + min(self.own, 1)) + 1


def _register_tile(unit: VectorUnit, lanes: int, v_ext: int, run: int, u_ext: int,
                   loads: _Loads = _Loads(), max_rows: int | None = None) -> tuple[int, int, bool]:
    """(nvec, rows, slides): the most useful FMA work per load that fits the registers (a vector
    wider than the unit's, a whole row, takes ``ceil(lanes / unit.lanes)`` registers). A tile
    whose rows would slide along a reduction loop (``loads.taps > 1``) is weighed against the
    same rows loading their own vectors: its window of rows may not fit the registers.
    ``max_rows`` bounds the rows (``MAX_STREAMS``)."""
    per_block = run // lanes if run < v_ext else math.ceil(v_ext / lanes)
    regs = math.ceil(lanes / unit.lanes)
    best: tuple[float, int, int, bool] = (-1.0, 1, 1, False)
    ways = [loads] + ([dataclasses.replace(loads, own=loads.own + loads.sliding, sliding=0, taps=1)]
                      if loads.taps > 1 else [])
    for way in ways:
        for nvec in range(1, min(_MAX_NVEC, max(per_block, 1)) + 1):
            if run < v_ext and per_block % nvec:  # vectors of a tile stay inside one layout block
                continue
            for rows in range(1, min(u_ext, max_rows or u_ext) + 1):
                acc = rows * nvec * regs
                if acc + way.live(rows, nvec * regs) > unit.registers:
                    break
                if way.taps > 1 and rows == 1:
                    continue
                if (way.taps > 1 or way.gather > 1) and u_ext % rows:
                    # a guarded row breaks a sliding tile's reuse and a tile of gathers' sharing
                    continue
                guard = 1.0 if u_ext % rows == 0 else 0.9  # a guarded tail costs a test per row
                # cycles per reduction step: FMAs, loads or the FMA latency chain, whichever binds
                # (with a cycle of slack on the latency)
                cycles = max(acc / _FMA_PORTS, way.count(rows, nvec * regs) / _LOAD_PORTS, _FMA_LATENCY + 1)
                score = _fill(u_ext, rows) * _fill(v_ext, nvec * lanes) * guard * acc / _FMA_PORTS / cycles
                # on a tie, more accumulators while they are too few to cover the FMA latency
                if score > best[0] + 1e-9 or (score > best[0] - 1e-9 and best[1] * best[2] * regs < acc
                                              and best[1] * best[2] * regs < MIN_ACCUMULATORS):
                    best = (score, nvec, rows, way.taps > 1)
    return best[1:]


def _loads(a: Analysis, vector: str, rows_loop: str | None) -> tuple[_Loads, str | None]:
    """How the reads move along the rows (``_Loads``) and the sliding reduction loop, if any."""
    vreads = vector_reads(a, vector)
    if rows_loop is None:
        return _Loads(shared=len(vreads), row_broadcasts=0, broadcasts=len(a.reads) - len(vreads)), None
    own = [r for r in vreads if r.strides.get(rows_loop) != 0]
    slide = None
    if own:
        # a reduction loop along which every read the rows do not share moves as along the rows
        slide = next((lp.name for lp in a.reduction if 1 < lp.extent <= _MAX_TAPS
                      and all(r.strides.get(lp.name) == r.strides.get(rows_loop) and r.runs[lp.name] >= lp.extent
                              for r in own)), None)
    broadcast = [r for r in a.reads if r.strides.get(vector) == 0]
    per_row = sum(r.strides.get(rows_loop) != 0 for r in broadcast)
    shared_run = min([r.runs[rows_loop] for r in vreads if r not in own] or [RUN_CAP])
    return _Loads(shared=len(vreads) - len(own), sliding=len(own) if slide else 0,
                  taps=a.extent(slide) if slide else 1, own=0 if slide else len(own),
                  row_broadcasts=per_row, broadcasts=len(broadcast) - per_row, shared_run=shared_run), slide


def _streamed(a: Analysis, vector: str, rows_loop: str | None) -> int:
    """How many vector reads each row of a tile streams on its own: reads that move along the
    rows and whose every element is read once (``_read_once``)."""
    if rows_loop is None:
        return 0
    loops = [lp.name for lp in a.loops if lp.extent > 1]
    return sum(1 for r in vector_reads(a, vector) if r.strides.get(rows_loop) and _read_once(a, r.strides, loops))


def _read_once(a: Analysis, strides: dict[str, int], loops: list[str]) -> bool:
    """Whether the loops address every element at most once: their strides, smallest first,
    each step past all the smaller ones span (a packed weight; not a conv's input, whose
    ``h`` and ``kh`` read the same rows, nor a read some loop does not move)."""
    span = 0
    for stride, extent in sorted((abs(strides.get(name) or 0), a.extent(name)) for name in loops):
        if stride <= span:
            return False
        span += stride * (extent - 1)
    return True


def _inner_reduction(a: Analysis, vector: str, lanes: int, nr: int, l1: int) -> tuple[str | None, int]:
    """The reduction loop to run innermost (contiguous in the broadcast operand) and its block size."""
    broadcast = [r for r in a.reads if r.strides.get(vector) == 0] or list(a.reads)
    cands = [(r.runs[lp.name], lp) for r in broadcast for lp in a.reduction
             if r.strides.get(lp.name) == 1 and lp.extent > 1]
    if not cands:
        return None, 0
    run, lp = max(cands, key=lambda c: c[0])
    # the vector operand's slice for one block of the inner loop stays in half of L1
    cap = max(lanes, (l1 // 2) // (4 * nr * max(1, math.prod(o.extent for o in a.reduction if o is not lp))))
    kc = _divisor_at_most(lp.extent, min(run, cap))
    return lp.name, (kc if 1 < kc < lp.extent else 0)


def plan(a: Analysis, unit: VectorUnit, l1: int) -> Tile:
    """The register tile for this block on this vector unit (``l1``: the L1 data cache in bytes).

    >>> from workbench.engine.schedules.tiling.analysis import analyse
    >>> from workbench.engine.schedules.tiling.steps import _example
    >>> from workbench.engine.build.targets import VectorUnit
    >>> plan(analyse(_example()[0]), VectorUnit(8, 16, True, "AVX2"), 32768)
    Tile(vector='j', lanes=8, nvec=2, rows_loop='i', rows=4, inner='k', kc=0, slide=None)
    """
    vector, run = _vector_loop(a, unit.lanes)
    v_ext = a.extent(vector)
    rows_loop = _rows_loop(a, vector)
    shared = rows_loop is not None and all(r.strides.get(rows_loop) == 0 for r in vector_reads(a, vector))
    gathered = any(r.kind(vector, v_ext) == "gather" for r in a.reads)
    lanes = _lanes(run, v_ext, unit.lanes, whole=not shared and not gathered)
    u_ext = a.extent(rows_loop) if rows_loop else 1
    if not gathered:
        loads, slide = _loads(a, vector, rows_loop)
    else:
        # each lane is loaded alone: where the rows share gathered vectors whose lanes lie a few
        # floats apart (a stride-2 conv's input across output channels), each costs its lanes in
        # loads, so more rows share fewer of them; elsewhere (a GEMM's B read across rows of K, a
        # stride-2 depthwise conv) the shared-operand model fits better
        shared_gather = rows_loop is not None and any(
            r.strides.get(rows_loop) == 0 and 1 < abs(r.strides.get(vector) or 0) <= _NEAR_GATHER
            for r in vector_reads(a, vector))
        loads, slide = _Loads(gather=unit.lanes if shared_gather else 1), None
    streams = _streamed(a, vector, rows_loop)
    max_rows = max(1, MAX_STREAMS // streams) if streams else u_ext
    nvec, rows, slides = _register_tile(unit, lanes, v_ext, max(run, lanes), u_ext, loads, max_rows)
    inner, kc = _inner_reduction(a, vector, lanes, nvec * lanes, l1)
    if not slides or slide == inner and kc:
        slide = None  # a blocked inner loop keeps its order
    return Tile(vector, lanes, nvec, rows_loop, rows, inner, kc, slide)
