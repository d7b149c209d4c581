"""The expert template's loop steps for a complex op (convs of any rank, depthwise, grouped,
dilated and transposed, and GEMM) in any stored layout: the NeoCPU / oneDNN direct conv and BLIS
micro-kernel structure, read off the kernel's main block (``analysis``) with the register tile
of ``tile_plan``.

``tile_steps`` splits and reorders the loops to ``[outer spatial] [reduction] rows, nvec,
lanes``, fuses the outer loops and runs them in parallel, caches the output in a register tile
per parallel iteration (the epilogue inlined into its write-back), unrolls rows and nvec and
vectorizes the lanes. A transposed conv's loops are split by stride phase first
(``Analysis.phases``); padding stages follow ``pad_stages``. ``analyse``, ``main_block``,
``plan`` and their types are importable from here too.
"""

from __future__ import annotations

import math
from typing import Sequence

from tvm import tirx

from ...loops.primitives import list_blocks
from ...base.step import Step
from ...build.targets import VectorUnit
from .analysis import Analysis, analyse, main_block, plain_write, vector_reads
from ..builder import KernelStepBuilder
from .pad_stages import pads, parallel_pass, plane_loops, reads_own_slice
from .plan import Tile, gathers, plan

__all__ = ["Analysis", "Tile", "analyse", "plan", "tile_steps", "main_block"]

#: most taps of a transposed conv's phase to unroll inside its channel loop, where its rows are
#: q: left to LLVM, the taps keep a loop whose rows' addresses go to the stack (where the vector
#: is q, a plain layout, they stay a loop)
_MAX_PHASE_TAPS = 32
#: ``transform_layout``'s factors and perm for the register tile
_Layout = tuple[list[int], list[int]]


def _example(n: int = 16) -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """The doctests' kernels: ``C = A @ B`` on n x n matrices, and ``B = A * 2`` on n values."""
    from tvm import te

    a, b = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    x = te.placeholder((n,), name="A")
    return te.create_prim_func([a, b, c]), te.create_prim_func([x, te.compute((n,), lambda i: x[i] * 2.0, name="B")])


def tile_steps(func: tirx.PrimFunc, kernel: str, unit: VectorUnit, l1: int, cores: int = 2) -> list[Step]:
    """The template's loop steps for ``func`` (see the module docstring).

    >>> from workbench.engine.build.targets import VectorUnit
    >>> for s in tile_steps(_example()[0], "mm", VectorUnit(8, 16, True, "AVX2"), 32768):
    ...     print(s)
    split(block='C', loop='j', factors=[None, 2, 8])
    split(block='C', loop='i', factors=[None, 4])
    reorder(block='C', loops=['j_0', 'i_0', 'k', 'i_1', 'j_1', 'j_2'])
    cache_write(block='C', write_index=0, scope='local')
    reverse_compute_at(block='C_local', target_block='C', loop='i_0')
    vectorize(block='C_local', loop='ax1')
    parallel(block='C', loop='i_0')
    unroll(block='C', loop='i_1')
    unroll(block='C', loop='j_1')
    vectorize(block='C', loop='j_2')
    decompose_reduction(block='C', loop='k')
    """
    a = analyse(func)
    b = KernelStepBuilder(func, kernel)
    phases: list[str] = []  # the phase loops r of y = s*q + r: inside the tile's loop, outside the reduction
    tile_layout: _Layout | None = None
    if phased := _by_phase(func, kernel, a, unit, l1):
        b, a, t, phases, tile_layout = phased
    else:
        t = plan(a, unit, l1)
    m = a.block
    v_outer, v_tile = _split(b, m, t.vector, a.extent(t.vector), [t.nvec, t.lanes] if t.nvec > 1 else [t.lanes])
    u_outer, u_tile = _split(b, m, t.rows_loop, a.extent(t.rows_loop), [t.rows]) if t.rows_loop else ([], [])
    red = _reduction_order(b, a, t)
    others = [lp.name for lp in a.spatial if lp.name not in (t.vector, t.rows_loop, *phases)]
    extent = {lp.name: lp.extent for lp in b.loops(m)}
    # phases with the output channels as the vector (not q)
    channel_phases = bool(phases) and not tile_layout
    order = _outer_order(a, t, others, v_outer, u_outer, channel_phases)
    # unit loops stay outside the fused loop: fusing them into it miscompiles transposed convs
    units = [n for n in order if extent[n] == 1]
    outer = [n for n in order if extent[n] > 1]
    b.do("reorder", block=m, loops=units + outer + phases + red + u_tile + v_tile)
    outer = _fuse_outer(b, a, t, others, outer, cores)
    _write_back(b, a, t, outer, len(units) + len(outer), not phases, tile_layout)
    if outer:
        b.do("parallel", block=m, loop=outer[0])
    # phases with the output channels as the vector: the taps inside the channel loop (the first
    # reduction loop, unless the channels are split into an inner block) run unrolled
    unrolled_taps = channel_phases and not t.inner and math.prod(extent[n] for n in red[1:]) <= _MAX_PHASE_TAPS
    taps = red[1:] if unrolled_taps else []
    for name in phases + taps + ([t.slide] if t.slide else []) + u_tile + v_tile[:-1]:
        b.do("unroll", block=m, loop=name)
    if v_tile:
        b.do("vectorize", block=m, loop=v_tile[-1])
    inside = _pads_inside(b, a, outer)
    b.do("decompose_reduction", block=m, loop=red[0])
    for blk in a.before:  # padding stages: a pass over memory, split among the cores
        if blk not in inside:
            parallel_pass(b, blk, vector=False)
    return b.steps


def _by_phase(func: tirx.PrimFunc, kernel: str, a: Analysis, unit: VectorUnit,
              l1: int) -> tuple[KernelStepBuilder, Analysis, Tile, list[str], _Layout | None] | None:
    """A transposed conv's loops split by stride phase: the builder with the splits, the split
    kernel's analysis, its tile, the phase loops and, where the vector is q, the tile's layout
    by phase; None where there are no phases or the split does not pay.

    A transposed conv reads its input at (y + p) // s and its weight at (y + p) % s: a vector
    along y would gather, and rows along y would not share the weight's vector. Split
    y = s*q + r: along q the input is contiguous or broadcast and the weight broadcast, so q can
    be the vector loop (on a plain layout) or the rows (where the output channels are the
    vector: ALT's tiled layout). The tile covers every phase of its q range, so that it is one
    box of the output (TVM writes back a tile's bounding box); a tile whose vector is q is
    stored by phase (``_phase_layout``) so that each vector of q is contiguous in it."""
    periods = a.phases()
    if not periods:
        return None
    trial = KernelStepBuilder(func, kernel)
    for loop, s in periods.items():
        trial.do("split", block=a.block, loop=loop, factors=[None, s])
    split = analyse(trial.sch.mod["main"], split=True)
    tile = plan(split, unit, l1)
    rs = [f"{loop}_1" for loop in periods]
    by_phase = tile.vector in {f"{loop}_0" for loop in periods}
    if gathers(split, unit.lanes) or {tile.vector, tile.rows_loop} & set(rs) or (by_phase and not plain_write(a)):
        return None
    layout = _phase_layout([periods.get(lp.name, 1) for lp in a.spatial]) if by_phase else None
    return trial, split, tile, rs, layout


def _reduction_order(b: KernelStepBuilder, a: Analysis, t: Tile) -> list[str]:
    """The reduction loops in the tile's order (the inner loop, split by ``kc`` where the tile
    blocks it, innermost; then the sliding loop), after the split's step."""
    red = [lp.name for lp in a.reduction]
    if t.inner:
        if t.kc:
            b.do("split", block=a.block, loop=t.inner, factors=[None, t.kc])
            red = [f"{t.inner}_0"] + [r for r in red if r != t.inner] + [f"{t.inner}_1"]
        else:
            red = [r for r in red if r != t.inner] + [t.inner]
    if t.slide:
        red = [r for r in red if r != t.slide] + [t.slide]
    return red


def _outer_order(a: Analysis, t: Tile, others: list[str], v_outer: list[str], u_outer: list[str],
                 channel_phases: bool) -> list[str]:
    """The loops outside the tile, outermost first."""
    if t.rows_loop and _grouped_rows(a, t):
        # each block of rows reads its own slice of the vector operand (a group's channels): the
        # block loop goes outermost, so the loops inside it (output rows h) reuse that slice from
        # L1 (h outermost would cycle through every group)
        return u_outer + others + v_outer
    if channel_phases:
        # the loops along which the vector operand (the weight) changes outermost, so that the
        # tiles inside reuse its block: a transposed conv reads it once per phase; then the
        # blocks of rows where the tile does not hold them all
        vreads = vector_reads(a, t.vector)
        picks = [n for n in others if any(r.strides.get(n, 0) != 0 for r in vreads)] + v_outer + u_outer
        return picks + [n for n in others if n not in picks]
    return others + v_outer + u_outer


def _fuse_outer(b: KernelStepBuilder, a: Analysis, t: Tile, others: list[str], outer: list[str],
                cores: int) -> list[str]:
    """Fuse the outer loops (as many as ``plane_loops`` says) into the loop that runs in parallel;
    the outer loops after it."""
    # TVM 0.27 miscompiles a fused loop read through floordiv (the stride phases of a transposed
    # conv): outer loops along which an access is not affine stay unfused, the first one parallel
    bent = {lp.name for lp in a.spatial if any(acc.runs[lp.name] < lp.extent for acc in a.reads)}
    if len(outer) > 1 and not bent & {t.vector, t.rows_loop, *others}:
        k = plane_loops(b, a, a.block, outer, cores) or len(outer)
        if k > 1:
            b.do("fuse", block=a.block, loops=outer[:k])
            outer = ["_".join(outer[:k]) + "_fused"] + outer[k:]
    return outer


def _write_back(b: KernelStepBuilder, a: Analysis, t: Tile, outer: list[str], depth: int, vector_last: bool,
                tile_layout: _Layout | None) -> None:
    """Cache the output in a register tile (stored by phase with ``tile_layout``, else with the
    vector innermost where ``vector_last`` allows), inline the epilogue into its write-back, and
    write it back under the last of the ``outer`` loops (the loops inside ``depth`` vectorized)."""
    m = a.block
    b.do("cache_write", block=m, write_index=0, scope="local")
    if tile_layout:
        b.do("transform_layout", block=m, write_index=0, factors=tile_layout[0], perm=tile_layout[1])
    elif vector_last and (last := _vector_last(a, t)):  # (split by phase, the loops are not the output's dims)
        # attempted: an imported kernel's loops need not map one to one onto its output's dims
        b.attempt("transform_layout", block=m, write_index=0, factors=last[0], perm=last[1])
    for blk in a.after:  # the epilogue, applied on the tile as it is written back
        b.attempt("reverse_compute_inline", block=blk)
    copy = f"{a.write.buffer}_local"
    remaining = [blk for blk in a.after if blk in list_blocks(b.sch)]
    # TVM 0.27's reverse_compute_at keeps only the iterations that read the tile: an epilogue
    # that pads (writes its consumer's zero halo) would lose its border, so it stays a pass of its own
    padding = [blk for blk in remaining if pads(b.sch.mod["main"], blk)]
    if outer:
        b.do("reverse_compute_at", block=copy, target_block=m, loop=outer[-1])
        for blk in remaining:
            if blk not in padding:
                b.attempt("reverse_compute_at", block=blk, target_block=m, loop=outer[-1])
    for blk in padding:
        parallel_pass(b, blk)
    for blk in [copy] + [blk for blk in remaining if blk not in padding]:
        inner = [lp for lp in b.loops(blk) if not outer or lp.depth >= depth]
        if inner and inner[-1].extent > 1:
            b.attempt("vectorize", block=blk, loop=inner[-1].name)


def _pads_inside(b: KernelStepBuilder, a: Analysis, outer: Sequence[str]) -> list[str]:
    """The padding stages computed under the parallel loop (``reads_own_slice``), after their steps."""
    inside = []
    for blk in a.before if outer else []:  # one at a time: each is checked on the schedule as it is
        if reads_own_slice(b, blk, a.block, outer[0]):
            b.do("compute_at", block=blk, target_block=a.block, loop=outer[0])
            inside.append(blk)
    return inside


def _split(b: KernelStepBuilder, block: str, loop: str, ext: int, inner: list[int]) -> tuple[list[str], list[str]]:
    """Split ``loop`` into an outer loop and ``inner`` extents (``[rows]`` or ``[nvec, lanes]``):
    the outer loops and the tile loops. A product that does not divide gets a guarded tail on
    the outer loop, the lanes staying exact when they divide the extent."""
    if math.prod(inner) >= ext and len(inner) == 1:
        return [], [loop]
    if len(inner) == 1 or ext % math.prod(inner) == 0:
        b.do("split", block=block, loop=loop, factors=[None, *inner])
        names = [f"{loop}_{i}" for i in range(len(inner) + 1)]
        return names[:1], names[1:]
    # e.g. 56 by 2 x 8, or 13 by 2 x 8: lanes first, then the vector count over what is left
    nvec, lanes = inner
    b.do("split", block=block, loop=loop, factors=[None, lanes])
    if math.ceil(ext / lanes) <= nvec:
        return [], [f"{loop}_0", f"{loop}_1"]
    b.do("split", block=block, loop=f"{loop}_0", factors=[None, nvec])
    return [f"{loop}_0_0"], [f"{loop}_0_1", f"{loop}_1"]


def _grouped_rows(a: Analysis, t: Tile) -> bool:
    """Whether the tile's rows share the vector operand's loads only within runs shorter than
    their loop (a grouped conv's output channels: one group's input per run)."""
    return any(r.strides.get(t.rows_loop) == 0 and r.runs[t.rows_loop] < a.extent(t.rows_loop)
               for r in vector_reads(a, t.vector))


def _phase_layout(periods: list[int]) -> _Layout:
    """``transform_layout``'s factors and perm that store a tile by stride phase: the dims without
    a period first, then every phase ``y % s``, then every ``y // s`` (the vector's, innermost).

    >>> _phase_layout([1, 1, 2, 2])  # (n, o, h, w) -> (n, o, h % 2, w % 2, h // 2, w // 2)
    ([1, 1, 2, 2], [0, 1, 3, 5, 2, 4])
    """
    kept, inner, outer, pos = [], [], [], 0
    for s in periods:
        if s > 1:
            outer.append(pos)
            inner.append(pos + 1)
            pos += 2
        else:
            kept.append(pos)
            pos += 1
    return list(periods), kept + inner + outer


def _vector_last(a: Analysis, t: Tile) -> _Layout | None:
    """``transform_layout``'s factors and perm that store the register tile with the vector
    loop's dim innermost, where the output is stored as its loops run but not contiguous along
    the vector (ALT's tiled input and weight with the output kept in NCHW, ``tile_out=False``:
    the output channels are the vector; an output alone in NHWC or NCHW16c over an NCHW input:
    the vector is the input's rows). Stored as the output is, each of the tile's vectors would
    have its lanes a row apart."""
    names = [lp.name for lp in a.spatial]
    if t.vector not in names or a.write.strides.get(t.vector) == 1 or not plain_write(a):
        return None
    k = names.index(t.vector)
    return [1] * len(names), [i for i in range(len(names)) if i != k] + [k]
