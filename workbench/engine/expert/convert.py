"""Analytic schedules for layout-conversion kernels: a conversion moves memory and computes
nothing, so its schedule aims at the copy bandwidth (STREAM's copy, ``ceilings.copy_gbs``).

``conversion_steps(func, kernel, target)`` gives the schedule as the session's own ``loop``
steps, from the kernel's single block (its loops run over the destination's stored shape):

- **vector**: the destination's contiguous run (the innermost loops, fused while their product
  is not a multiple of the target's vector lanes) is split by the lanes and vectorized. A run
  whose total does not divide the lanes is split by a divisor between one and four vectors
  (one vector of that width: LLVM finishes the remainder in a narrower register), so TVM never
  falls back to scalar code on such sizes; a split with a predicate (which TVM scalarizes) is
  the last resort, for run lengths with no such divisor.
- **cache tile**: when the source's contiguous dim is driven by another loop (a transpose:
  NCHW -> NCHW16c, NCHW16c -> NCHW, NHWC...), that loop is tiled by a cache line of elements
  and its tile moved right above the vector loop, so every source line fetched is used whole
  while it is in L1 (a tile of line x vector elements), instead of once per sweep.
- **parallel**: the outer loops are fused until they give every core several chunks, then run
  in parallel.

``conversion_bandwidth`` measures a conversion kernel's rate (bytes read + written per second)
against the machine's copy bandwidth.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import tvm
from tvm import tirx
from tvm.sym.analyzer import Analyzer

from ..ceilings import cache_info, get_ceilings
from ..errors import LoopError
from ..loops import LoopInfo, apply_step, apply_steps, list_blocks, list_loops, loop_step, visit_nodes, walk_nest
from ..step import Step
from ..targets import target_from, vector_unit

__all__ = ["conversion_steps", "Bandwidth", "conversion_bandwidth"]

#: parallel chunks wanted per core (load balance across cores of unequal speed or load)
_CHUNKS_PER_CORE = 8
#: widest vector loop, in vectors, for a run that does not divide the lanes
_MAX_VECTORS = 4


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
    line = max(cache_info()[1] // 4, lanes)  # float32 elements per cache line
    cores = int(target.get("num-cores") or os.cpu_count() or 1)
    strides = _source_strides(func, block, loops)
    b = _Builder(func, kernel, block)

    # 1. the vector run: the innermost loops, fused until a multiple of the lanes
    run, width = _vector_run([lp.extent for lp in loops], lanes)
    first = len(loops) - run
    if run > 1:
        b.step("fuse", loops=[lp.name for lp in b.loops()[first:]])
    total = b.loops()[-1].extent
    if total > width:
        b.step("split", loop=b.loops()[-1].name, factors=[None, width])
    # 2. the cache tile: the loop the source is contiguous along, when outside the run
    vec_stride = strides[-1] if run == 1 else None
    src = _contiguous_loop(strides[:first], [lp.extent for lp in loops[:first]], line)
    if src is not None and vec_stride != 1:
        ext = loops[src].extent
        tile = _divisor_near(ext, line) if ext > line else ext
        if tile < ext:
            b.step("split", loop=b.loops()[src].name, factors=[None, tile])
        cur = b.loops()
        inner = cur[src + 1] if tile < ext else cur[src]
        if cur[-2].name != inner.name:  # move the tile right above the vector loop
            order = [lp for lp in cur[:-1] if lp.name != inner.name] + [inner, cur[-1]]
            head = next(k for k, (x, y) in enumerate(zip(cur, order)) if x.name != y.name)
            b.step("reorder", loops=[lp.name for lp in order[head:]])
        tiled = 2
    else:
        tiled = 1
    # 3. parallel outer loops: fused until every core has several chunks
    cur = b.loops()
    outer = cur[:len(cur) - tiled]
    take, chunks = 0, 1
    while take < len(outer) and chunks < cores * _CHUNKS_PER_CORE:
        chunks *= outer[take].extent
        take += 1
    if take > 1:
        b.step("fuse", loops=[lp.name for lp in outer[:take]])
    if take and b.loops()[0].extent > 1 and cores > 1:
        b.step("parallel", loop=b.loops()[0].name)
    # 4. vectorize the innermost loop
    b.step("vectorize", loop=b.loops()[-1].name)
    return b.steps


class _Builder:
    """Steps applied as they are made, so that each names the loops as they are now."""

    def __init__(self, func: tirx.PrimFunc, kernel: str, block: str) -> None:
        self.sch = apply_steps(func, [])
        self.kernel, self.block, self.steps = kernel, block, []

    def loops(self) -> list[LoopInfo]:
        return list_loops(self.sch, self.block)

    def step(self, primitive: str, **args: Any) -> None:
        s = loop_step(primitive, self.kernel, block=self.block, **args)
        self.sch = apply_step(self.sch, s)
        self.steps.append(s)


def _vector_run(extents: Sequence[int], lanes: int) -> tuple[int, int]:
    """How many innermost loops to fuse into the vector loop, and the vector loop's width.

    The shortest run whose product is a multiple of the lanes; failing that the innermost
    loop alone, vectorized whole when short or split by a divisor of one to four vectors."""
    prod = 1
    for k in range(1, len(extents) + 1):
        prod *= extents[-k]
        if prod % lanes == 0:
            return k, lanes
    last = extents[-1]
    if last <= _MAX_VECTORS * lanes:
        return 1, last
    return 1, _divisor_near(last, lanes, _MAX_VECTORS * lanes)


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


def _contiguous_loop(strides: Sequence[int | None], extents: Sequence[int], line: int) -> int | None:
    """The outer loop along which the source is read contiguously (stride under a cache line),
    the smallest stride first; None when there is none."""
    cands = [(s, k) for k, (s, e) in enumerate(zip(strides, extents)) if s is not None and 0 < s < line and e > 1]
    return min(cands)[1] if cands else None


def _source_strides(func: tirx.PrimFunc, block: str, loops: Sequence[LoopInfo]) -> list[int | None]:
    """Per loop, how far (in elements) one step moves the read in the source buffer (at the
    origin of the iteration space); None for unit loops or when the read cannot be found."""
    realize = _realize(func, block)
    loads: list[Any] = []  # 0.27's loads are TensorLoad nodes (their buffer is ``source``)
    visit_nodes(realize.block.body, lambda n: loads.append(n) if type(n).__name__ in ("BufferLoad", "TensorLoad")
                else None)
    if not loads or len(realize.iter_values) != len(loops):
        return [None] * len(loops)
    load = loads[0]  # a conversion block reads its one input (twice at most: under a padding guard)
    shape = [int(n) for n in (load.source if hasattr(load, "source") else load.buffer).shape]
    ivars = [iv.var for iv in realize.block.iter_vars]

    def offset(point: Sequence[int]) -> int | None:
        ana = Analyzer()
        for v, x in zip(ivars, point):
            ana.bind(v, x)
        flat = 0
        for i, n in zip(load.indices, shape):
            flat = flat * n + i
        val = ana.simplify(flat)
        return int(val.value) if isinstance(val, tirx.IntImm) else None

    origin = [0] * len(loops)
    base = offset(origin)
    out: list[int | None] = []
    for k, lp in enumerate(loops):
        nxt = None if lp.extent == 1 or base is None else offset(origin[:k] + [1] + origin[k + 1:])
        out.append(None if nxt is None else abs(nxt - base))
    return out


def _realize(func: tirx.PrimFunc, block: str) -> Any:
    found: list[Any] = []

    def on_block(realize: Any, ctx: None) -> None:
        if realize.block.name_hint == block:
            found.append(realize)

    walk_nest(func, on_block, lambda loop, ctx: ctx, None)
    return found[0]


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


def conversion_bandwidth(func: tirx.PrimFunc, target: Mapping, steps: Sequence[Step] | None = None,
                         kernel: str = "conversion", min_s: float = 0.2) -> Bandwidth:
    """Build ``func`` (after ``steps``; default ``conversion_steps``), time it on random data
    (best of 5 repeats of at least ``min_s`` / 5 seconds each) and compare its rate with the
    copy bandwidth of ``target`` on this machine (``ceilings.get_ceilings``, measured once).

    Bytes = every input buffer read once + every output buffer written once: an unfold's halo
    is counted once on the read side (what the source holds) and in full on the write side."""
    steps = conversion_steps(func, kernel, target) if steps is None else steps
    sch = apply_steps(func, steps)
    lib = tvm.compile(tvm.IRModule({"main": sch.mod["main"]}), target=target_from(target)).jit()
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(rng.random([int(n) for n in p.shape], dtype=np.float32)) for p in func.params]
    nbytes = sum(a.numpy().nbytes for a in args)
    fn = lib["main"]
    fn(*args)  # warm-up
    t0 = time.perf_counter()
    fn(*args)
    one = max(time.perf_counter() - t0, 1e-6)
    number = max(1, int(min_s / 5 / one))
    ev = lib.time_evaluator("main", tvm.cpu(), number=number, repeat=5)
    secs = min(float(x) for x in ev(*args).results)
    gbs = nbytes / secs / 1e9
    return Bandwidth(kernel, nbytes, secs * 1e3, gbs, get_ceilings(target).copy_gbs)
