"""One analytic register-blocked template for every complex op (convs of any rank, depthwise,
grouped, dilated and transposed, and GEMM), in any stored layout: the NeoCPU / oneDNN direct
conv and BLIS micro-kernel structure, read off the kernel's main block rather than written per op.

``analyse`` reads the main block (the one with reduction iterators): its loops and, for every
buffer, the flat stride of each iterator (broadcast, contiguous or gather). ``plan`` picks the
vector loop (no input gathered along it), the rows loop (the vector operand shared by every row,
or sliding along a reduction loop), the register tile ``rows x nvec`` that fits the registers and
covers the FMA latency, and the reduction order. A transposed conv's loops are split by stride
phase (``Analysis.phases``) so that its vectors stay contiguous. ``tile_steps`` turns the plan
into loop steps: split and reorder to ``[outer spatial] [reduction] rows, nvec, lanes``, the
outer loops fused and parallel, the output cached in a register tile per parallel iteration, the
epilogue inlined into its write-back, rows and nvec unrolled, the lanes vectorized; a padding
stage runs as a pass of its own or under the parallel loop (``_reads_own_slice``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from tvm import s_tir, tirx
from tvm.sym import Analyzer

from ..errors import LoopError
from ..loops import LoopInfo, apply_step, block_nest, list_blocks, list_loops, loop_step, visit_nodes
from ..step import Step
from ..targets import VectorUnit

__all__ = ["Access", "Analysis", "Tile", "analyse", "plan", "tile_steps", "main_block"]

#: accumulators that cover the FMA latency (2 FMA ports x 4 cycles on Zen 3 and Skylake)
MIN_ACCUMULATORS = 8
# one load per cycle, not two: broadcast-heavy tiles are bound by their loads, not their FMAs
_FMA_PORTS, _FMA_LATENCY, _LOAD_PORTS = 2, 4, 1
#: fewest elements of a padding stage's slice worth computing under the parallel loop: a smaller
#: slice costs more in loop overhead than the pass of its own it saves
_MIN_SLICE = 256
#: fewest iterations per core of a parallel loop that pads a plane per iteration (``_plane_loops``)
_TASKS_PER_CORE = 8
#: longest run of a stride worth checking (longer runs behave the same for the template)
_RUN_CAP = 256
#: most taps of a transposed conv's phase to unroll inside its channel loop, where its rows are
#: q: left to LLVM, the taps keep a loop whose rows' addresses go to the stack (where the vector
#: is q, a plain layout, they stay a loop)
_MAX_PHASE_TAPS = 32
#: most vectors per tile row: more only shortens the rows, as the register rule bounds both
_MAX_NVEC = 4


def _example(n: int = 16) -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """The doctests' kernels: ``C = A @ B`` on n x n matrices, and ``B = A * 2`` on n values."""
    from tvm import te

    a, b = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    x = te.placeholder((n,), name="A")
    return te.create_prim_func([a, b, c]), te.create_prim_func([x, te.compute((n,), lambda i: x[i] * 2.0, name="B")])


########## Analysis: the main block's loops and accesses ##########

@dataclass(frozen=True)
class Access:
    """One buffer the main block reads (or writes): per loop name, the flat stride of one step
    (``None`` when not affine from 0 to 1) and the run of steps that keep it."""

    buffer: str
    strides: dict[str, int | None]
    runs: dict[str, int]
    #: loops along which the access is not affine but repeats with a period ``s``: an input read
    #: at ``(y + p) // s`` (a transposed conv's stride phases) is affine in ``q`` for ``y = s*q + r``
    periods: dict[str, int] = field(default_factory=dict)

    def kind(self, loop: str, width: int) -> str:
        """``broadcast``, ``contiguous`` (unit stride for ``width`` steps) or ``gather`` along ``loop``."""
        s = self.strides.get(loop, 0)
        if s == 0 and self.runs.get(loop, _RUN_CAP) >= width:
            return "broadcast"
        if s == 1 and self.runs.get(loop, 0) >= width:
            return "contiguous"
        return "gather"


@dataclass(frozen=True)
class Analysis:
    """The main block of a kernel: its loops (outermost first), reads, write and neighbours."""

    block: str
    loops: tuple[LoopInfo, ...]
    reads: tuple[Access, ...]
    write: Access
    before: tuple[str, ...]  # blocks that run before it (producers: padding...)
    after: tuple[str, ...]  # blocks after it (the element-wise epilogue)

    @property
    def spatial(self) -> list[LoopInfo]:
        return [lp for lp in self.loops if not lp.reduction]

    @property
    def reduction(self) -> list[LoopInfo]:
        return [lp for lp in self.loops if lp.reduction]

    def extent(self, loop: str) -> int:
        return next(lp.extent for lp in self.loops if lp.name == loop)

    def phases(self) -> dict[str, int]:
        """Stride phases: spatial loops along which the input and the weight both bend (read at
        ``(y + p) // s`` and ``(y + p) % s``, where a layout block bends one operand only) with
        the same period ``s`` dividing the loop. Split by ``s``, the reads become affine
        (contiguous or broadcast) along the outer part."""
        out = {}
        for lp in self.spatial:
            # (a run as long as _RUN_CAP is one that was not followed further, not a bend)
            bent = [r for r in self.reads if r.runs[lp.name] < min(lp.extent, _RUN_CAP)]
            periods = {r.periods.get(lp.name) for r in bent}
            if len(bent) >= 2 and len(periods) == 1 and (s := periods.pop()) and lp.extent % s == 0:
                out[lp.name] = s
        return out


def main_block(func: tirx.PrimFunc) -> str | None:
    """The first block with a reduction iterator (a complex op), None when there is none.

    >>> matmul, double = _example()
    >>> main_block(matmul), main_block(double)
    ('C', None)
    """
    for name in list_blocks(func):
        if any(iv.iter_type == tirx.IterVar.CommReduce for iv in block_nest(func, name)[0].block.iter_vars):
            return name
    return None


def _flat(buf: Any, indices: Any) -> tirx.PrimExpr:
    """The flat offset of an access (row-major over the buffer's shape)."""
    off: Any = 0
    for extent, idx in zip(buf.shape, indices):
        off = off * int(extent) + idx
    return off


def _at(expr: tirx.PrimExpr, env: Mapping[tirx.Var, int]) -> int | None:
    ana = Analyzer()
    for var, value in env.items():
        ana.bind(var, tirx.const(value, var.ty.dtype))
    out = ana.simplify(expr)
    return int(out.value) if isinstance(out, tirx.IntImm) else None


def _period(off: tirx.PrimExpr, var: tirx.Var, zero: Mapping[tirx.Var, int], extent: int) -> int | None:
    """The smallest step ``s`` (2-8) after which the offset along ``var`` moves by the same amount
    from every position checked, if any."""
    at = [_at(off, {**zero, var: j}) for j in range(min(extent, 24))]
    if None in at:
        return None
    for s in range(2, min(len(at) // 2, 8) + 1):
        if len({at[j + s] - at[j] for j in range(len(at) - s)}) == 1:
            return s
    return None


def _access(buf: Any, indices: Any, loop_vars: Mapping[str, tirx.Var], extents: Mapping[str, int]) -> Access:
    """Stride and run of every loop in one access, evaluated at the origin of the iteration space,
    and the period of the loops along which it is not affine."""
    off = _flat(buf, indices)
    zero = {v: 0 for v in loop_vars.values()}
    base = _at(off, zero)
    strides: dict[str, int | None] = {}
    runs: dict[str, int] = {}
    periods: dict[str, int] = {}
    for name, var in loop_vars.items():
        step = _at(off, {**zero, var: 1}) if extents[name] > 1 else base
        stride = None if base is None or step is None else step - base
        run = 1
        while stride is not None and run < min(extents[name], _RUN_CAP) \
                and _at(off, {**zero, var: run}) == base + run * stride:
            run += 1
        strides[name], runs[name] = stride, run if extents[name] > 1 else _RUN_CAP
        if run < min(extents[name], _RUN_CAP) and (s := _period(off, var, zero, extents[name])):
            periods[name] = s
    return Access(str(buf.name), strides, runs, periods)


def analyse(func: tirx.PrimFunc, split: bool = False) -> Analysis:
    """Read the main block of an unscheduled kernel (``split``: or one whose loops the template
    has split, its accesses then read per loop through the iterators' bindings).

    Raises
    ------
    LoopError
        When the kernel has no reduction block, or its loops are already scheduled (a block
        iterator bound to anything but one loop, unless ``split``).

    Examples
    --------
    >>> a = analyse(_example()[0])
    >>> a.block, [(lp.name, lp.reduction) for lp in a.loops]
    ('C', [('i', False), ('j', False), ('k', True)])
    >>> [(r.buffer, r.strides) for r in a.reads]
    [('A', {'i': 16, 'j': 0, 'k': 1}), ('B', {'i': 0, 'j': 1, 'k': 16})]
    """
    name = main_block(func)
    if name is None:
        raise LoopError("the kernel has no complex op (no block with a reduction): expert schedules cover "
                        "convolutions and matmuls")
    realize, fors = block_nest(func, name)
    loops = list_loops(func, name)
    bind = Analyzer()  # block iterators -> their loop expressions, so that every stride is per loop
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if not (split or isinstance(value, tirx.Var)):
            raise LoopError(f"block {name!r} is already scheduled (iterator {iv.var.name} = {value}): expert "
                            "schedules start from the unscheduled kernel")
        bind.bind(iv.var, value)
    loop_var = {info.name: f.loop_var for info, f in zip(loops, fors)}
    extents = {lp.name: lp.extent for lp in loops}

    def access(buf: Any, indices: Any) -> Access:
        return _access(buf, [bind.rewrite_simplify(i) for i in indices], loop_var, extents)

    store = realize.block.body
    if not isinstance(store, tirx.BufferStore):
        raise LoopError(f"block {name!r} is not a single store; the expert template cannot read it")
    loads: dict[str, Access] = {}

    def visit(node: Any) -> None:
        buf = getattr(node, "source", None)  # 0.27's loads are TensorLoads naming their buffer ``source``
        if type(node).__name__ in ("TensorLoad", "BufferLoad") and buf is not None and buf.name != store.buffer.name \
                and buf.name not in loads:
            loads[buf.name] = access(buf, node.indices)

    visit_nodes(store.value, visit)
    blocks = list_blocks(func)
    at = blocks.index(name)
    return Analysis(name, tuple(loops), tuple(loads.values()), access(store.buffer, store.indices),
                    tuple(blocks[:at]), tuple(blocks[at + 1:]))


########## Plan: the register tile from the target ##########

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


def _plain_write(a: Analysis) -> bool:
    """Whether the output is stored as its spatial loops run (dims in loop order, no layout)."""
    extents = [lp.extent for lp in a.spatial]
    return all(a.write.strides.get(lp.name) == math.prod(extents[i + 1:])
               for i, lp in enumerate(a.spatial) if lp.extent > 1)


def _phase_layout(periods: list[int]) -> tuple[list[int], list[int]]:
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


def _vector_last(a: Analysis, t: Tile) -> tuple[list[int], list[int]] | None:
    """``transform_layout``'s factors and perm that store the register tile with the vector
    loop's dim innermost, where the output is stored as its loops run but not contiguous along
    the vector (ALT's tiled input and weight with the output kept in NCHW, ``tile_out=False``:
    the output channels are the vector; an output alone in NHWC or NCHW16c over an NCHW input:
    the vector is the input's rows). Stored as the output is, each of the tile's vectors would
    have its lanes a row apart."""
    names = [lp.name for lp in a.spatial]
    if t.vector not in names or a.write.strides.get(t.vector) == 1 or not _plain_write(a):
        return None
    k = names.index(t.vector)
    return [1] * len(names), [i for i in range(len(names)) if i != k] + [k]


def _gathers(a: Analysis, lanes: int) -> bool:
    """Whether the vector loop the template would pick gathers one of its reads."""
    vector, _ = _vector_loop(a, lanes)
    return any(r.kind(vector, min(a.extent(vector), lanes)) == "gather" for r in a.reads)


def _vector_reads(a: Analysis, vector: str) -> list[Access]:
    """The reads that change along the vector loop (the vector operands)."""
    return [r for r in a.reads if r.strides.get(vector) != 0]


def _rows_loop(a: Analysis, vector: str) -> str | None:
    """The spatial loop whose rows share the vector operand's loads."""
    vector_reads = _vector_reads(a, vector)
    rank = {name: -abs(s) if s else -math.inf for name, s in a.write.strides.items()}  # nearer the output's inner dim
    cands = [lp for lp in a.spatial if lp.name != vector and lp.extent > 1]
    if not cands:
        return None
    return max(cands, key=lambda lp: (sum(r.strides.get(lp.name) == 0 for r in vector_reads),
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
    shared_run: int = _RUN_CAP
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
                   loads: _Loads = _Loads()) -> tuple[int, int, bool]:
    """(nvec, rows, slides): the most useful FMA work per load that fits the registers (a vector
    wider than the unit's, a whole row, takes ``ceil(lanes / unit.lanes)`` registers). A tile
    whose rows would slide along a reduction loop (``loads.taps > 1``) is weighed against the
    same rows loading their own vectors: its window of rows may not fit the registers."""
    per_block = run // lanes if run < v_ext else math.ceil(v_ext / lanes)
    regs = math.ceil(lanes / unit.lanes)
    best: tuple[float, int, int, bool] = (-1.0, 1, 1, False)
    ways = [loads] + ([dataclasses.replace(loads, own=loads.own + loads.sliding, sliding=0, taps=1)]
                      if loads.taps > 1 else [])
    for way in ways:
        for nvec in range(1, min(_MAX_NVEC, max(per_block, 1)) + 1):
            if run < v_ext and per_block % nvec:  # vectors of a tile stay inside one layout block
                continue
            for rows in range(1, u_ext + 1):
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


#: most taps of a sliding reduction loop to unroll inside the rows
_MAX_TAPS = 7
#: widest stride (in elements) of a gather whose lanes count as loads of their own
_NEAR_GATHER = 4


def _loads(a: Analysis, vector: str, rows_loop: str | None) -> tuple[_Loads, str | None]:
    """How the reads move along the rows (``_Loads``) and the sliding reduction loop, if any."""
    vector_reads = _vector_reads(a, vector)
    if rows_loop is None:
        return _Loads(shared=len(vector_reads), row_broadcasts=0, broadcasts=len(a.reads) - len(vector_reads)), None
    own = [r for r in vector_reads if r.strides.get(rows_loop) != 0]
    slide = None
    if own:
        # a reduction loop along which every read the rows do not share moves as along the rows
        slide = next((lp.name for lp in a.reduction if 1 < lp.extent <= _MAX_TAPS
                      and all(r.strides.get(lp.name) == r.strides.get(rows_loop) and r.runs[lp.name] >= lp.extent
                              for r in own)), None)
    broadcast = [r for r in a.reads if r.strides.get(vector) == 0]
    per_row = sum(r.strides.get(rows_loop) != 0 for r in broadcast)
    shared_run = min([r.runs[rows_loop] for r in vector_reads if r not in own] or [_RUN_CAP])
    return _Loads(shared=len(vector_reads) - len(own), sliding=len(own) if slide else 0,
                  taps=a.extent(slide) if slide else 1, own=0 if slide else len(own),
                  row_broadcasts=per_row, broadcasts=len(broadcast) - per_row, shared_run=shared_run), slide


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

    >>> from workbench.engine.targets import VectorUnit
    >>> plan(analyse(_example()[0]), VectorUnit(8, 16, True, "AVX2"), 32768)
    Tile(vector='j', lanes=8, nvec=2, rows_loop='i', rows=4, inner='k', kc=0, slide=None)
    """
    vector, run = _vector_loop(a, unit.lanes)
    v_ext = a.extent(vector)
    rows_loop = _rows_loop(a, vector)
    shared = rows_loop is not None and all(r.strides.get(rows_loop) == 0 for r in _vector_reads(a, vector))
    gathers = any(r.kind(vector, v_ext) == "gather" for r in a.reads)
    lanes = _lanes(run, v_ext, unit.lanes, whole=not shared and not gathers)
    u_ext = a.extent(rows_loop) if rows_loop else 1
    if not gathers:
        loads, slide = _loads(a, vector, rows_loop)
    else:
        # each lane is loaded alone: where the rows share gathered vectors whose lanes lie a few
        # floats apart (a stride-2 conv's input across output channels), each costs its lanes in
        # loads, so more rows share fewer of them; elsewhere (a GEMM's B read across rows of K, a
        # stride-2 depthwise conv) the shared-operand model fits better
        shared_gather = rows_loop is not None and any(
            r.strides.get(rows_loop) == 0 and 1 < abs(r.strides.get(vector) or 0) <= _NEAR_GATHER
            for r in _vector_reads(a, vector))
        loads, slide = _Loads(gather=unit.lanes if shared_gather else 1), None
    nvec, rows, slides = _register_tile(unit, lanes, v_ext, max(run, lanes), u_ext, loads)
    inner, kc = _inner_reduction(a, vector, lanes, nvec * lanes, l1)
    if not slides or slide == inner and kc:
        slide = None  # a blocked inner loop keeps its order
    return Tile(vector, lanes, nvec, rows_loop, rows, inner, kc, slide)


########## Steps ##########

class _Builder:
    """Steps applied one by one to a running schedule, so later steps can read the loop names."""

    def __init__(self, func: tirx.PrimFunc, kernel: str) -> None:
        self.sch: Any = func
        self.kernel = kernel
        self.steps: list[Step] = []

    def do(self, primitive: str, **args: Any) -> None:
        step = loop_step(primitive, self.kernel, **args)
        self.sch = apply_step(self.sch, step)
        self.steps.append(step)

    def attempt(self, primitive: str, **args: Any) -> bool:
        """Apply a step that TVM may refuse for some kernels (e.g. inlining a non-element-wise block)."""
        try:
            self.do(primitive, **args)
        except LoopError:
            return False
        return True

    def loops(self, block: str) -> list[LoopInfo]:
        return list_loops(self.sch, block)


def _split(b: _Builder, block: str, loop: str, ext: int, inner: list[int]) -> tuple[list[str], list[str]]:
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


def tile_steps(func: tirx.PrimFunc, kernel: str, unit: VectorUnit, l1: int, cores: int = 2) -> list[Step]:
    """The template's loop steps for ``func`` (see the module docstring).

    >>> from workbench.engine.targets import VectorUnit
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
    b, m = _Builder(func, kernel), a.block
    phases: list[str] = []  # the phase loops r of y = s*q + r: inside the tile's loop, outside the reduction
    t: Tile | None = None
    tile_layout: tuple[list[int], list[int]] | None = None
    periods = a.phases()
    if periods:
        # a transposed conv reads its input at (y + p) // s and its weight at (y + p) % s: a
        # vector along y would gather, and rows along y would not share the weight's vector.
        # Split y = s*q + r: along q the input is contiguous or broadcast and the weight
        # broadcast, so q can be the vector loop (on a plain layout) or the rows (where the
        # output channels are the vector: ALT's tiled layout, DCGAN's 4x4 stride 2 0.34 -> 0.20
        # ms on AVX-512). The tile covers every phase of its q range, so that it is one box of
        # the output (TVM writes back a tile's bounding box); a tile whose vector is q is stored
        # by phase (``_phase_layout``) so that each vector of q is contiguous in it
        trial = _Builder(func, kernel)
        for loop, s in periods.items():
            trial.do("split", block=m, loop=loop, factors=[None, s])
        split = analyse(trial.sch.mod["main"], split=True)
        trial_tile = plan(split, unit, l1)
        rs = [f"{loop}_1" for loop in periods]
        by_phase = trial_tile.vector in {f"{loop}_0" for loop in periods}
        if not _gathers(split, unit.lanes) and not {trial_tile.vector, trial_tile.rows_loop} & set(rs) \
                and (_plain_write(a) or not by_phase):
            if by_phase:
                tile_layout = _phase_layout([periods.get(lp.name, 1) for lp in a.spatial])
            b, a, phases, t = trial, split, rs, trial_tile
    if t is None:
        t = plan(a, unit, l1)
    v_outer, v_tile = _split(b, m, t.vector, a.extent(t.vector), [t.nvec, t.lanes] if t.nvec > 1 else [t.lanes])
    u_outer, u_tile = _split(b, m, t.rows_loop, a.extent(t.rows_loop), [t.rows]) if t.rows_loop else ([], [])
    red = [lp.name for lp in a.reduction]
    if t.inner:
        if t.kc:
            b.do("split", block=m, loop=t.inner, factors=[None, t.kc])
            red = [f"{t.inner}_0"] + [r for r in red if r != t.inner] + [f"{t.inner}_1"]
        else:
            red = [r for r in red if r != t.inner] + [t.inner]
    if t.slide:
        red = [r for r in red if r != t.slide] + [t.slide]
    others = [lp.name for lp in a.spatial if lp.name not in (t.vector, t.rows_loop, *phases)]
    extent = {lp.name: lp.extent for lp in b.loops(m)}
    # unit loops stay outside the fused loop: fusing them into it miscompiles transposed convs
    order = others + v_outer + u_outer
    if t.rows_loop and _grouped_rows(a, t):
        # each block of rows reads its own slice of the vector operand (a group's channels): the
        # block loop goes outermost, so the loops inside it (output rows h) reuse that slice from
        # L1 (h outermost would cycle through every group)
        order = u_outer + others + v_outer
    elif phases and not tile_layout:
        # phases with the output channels as the vector (not q): the loops along which the
        # vector operand (the weight) changes outermost, so that the tiles inside reuse its
        # block: a transposed conv reads it once per phase; then the blocks of rows where the tile
        # does not hold them all
        vector_reads = _vector_reads(a, t.vector)
        picks = [n for n in others if any(r.strides.get(n, 0) != 0 for r in vector_reads)] + v_outer + u_outer
        order = picks + [n for n in others if n not in picks]
    units = [n for n in order if extent[n] == 1]
    outer = [n for n in order if extent[n] > 1]
    b.do("reorder", block=m, loops=units + outer + phases + red + u_tile + v_tile)
    # TVM 0.27 miscompiles a fused loop read through floordiv (the stride phases of a transposed
    # conv): outer loops along which an access is not affine stay unfused, the first one parallel
    bent = {lp.name for lp in a.spatial if any(acc.runs[lp.name] < lp.extent for acc in a.reads)}
    if len(outer) > 1 and not bent & {t.vector, t.rows_loop, *others}:
        k = _plane_loops(b, a, m, outer, cores) or len(outer)
        if k > 1:
            b.do("fuse", block=m, loops=outer[:k])
            outer = ["_".join(outer[:k]) + "_fused"] + outer[k:]
    out = a.write.buffer
    b.do("cache_write", block=m, write_index=0, scope="local")
    if tile_layout:
        b.do("transform_layout", block=m, write_index=0, factors=tile_layout[0], perm=tile_layout[1])
    elif not phases and (last := _vector_last(a, t)):  # (split by phase, the loops are not the output's dims)
        # attempted: an imported kernel's loops need not map one to one onto its output's dims
        b.attempt("transform_layout", block=m, write_index=0, factors=last[0], perm=last[1])
    for blk in a.after:  # the epilogue, applied on the tile as it is written back
        b.attempt("reverse_compute_inline", block=blk)
    copy = f"{out}_local"
    remaining = [blk for blk in a.after if blk in list_blocks(b.sch)]
    # TVM 0.27's reverse_compute_at keeps only the iterations that read the tile: an epilogue
    # that pads (writes its consumer's zero halo) would lose its border, so it stays a pass of its own
    padding = [blk for blk in remaining if _pads(b.sch.mod["main"], blk)]
    if outer:
        b.do("reverse_compute_at", block=copy, target_block=m, loop=outer[-1])
        for blk in remaining:
            if blk not in padding:
                b.attempt("reverse_compute_at", block=blk, target_block=m, loop=outer[-1])
    for blk in padding:
        _parallel_pass(b, blk)
    for blk in [copy] + [blk for blk in remaining if blk not in padding]:
        inner = [lp for lp in b.loops(blk) if not outer or lp.depth >= len(units) + len(outer)]
        if inner and inner[-1].extent > 1:
            b.attempt("vectorize", block=blk, loop=inner[-1].name)
    if outer:
        b.do("parallel", block=m, loop=outer[0])
    # phases with the output channels as the vector: the taps inside the channel loop (the first
    # reduction loop, unless the channels are split into an inner block) run unrolled
    unrolled_taps = phases and not tile_layout and not t.inner and math.prod(extent[n] for n in red[1:]) <= _MAX_PHASE_TAPS
    taps = red[1:] if unrolled_taps else []
    for name in phases + taps + ([t.slide] if t.slide else []) + u_tile + v_tile[:-1]:
        b.do("unroll", block=m, loop=name)
    if v_tile:
        b.do("vectorize", block=m, loop=v_tile[-1])
    inside = []
    for blk in a.before if outer else []:  # one at a time: each is checked on the schedule as it is
        if _reads_own_slice(b, blk, m, outer[0]):
            b.do("compute_at", block=blk, target_block=m, loop=outer[0])
            inside.append(blk)
    b.do("decompose_reduction", block=m, loop=red[0])
    for blk in a.before:  # padding stages: a pass over memory, split among the cores
        if blk not in inside:
            _parallel_pass(b, blk, vector=False)
    return b.steps


def _reads_own_slice(b: _Builder, block: str, m: str, loop: str, sch: Any = None) -> bool:
    """Whether a padding stage computed under the main block's parallel ``loop`` computes no more
    than the stage does: the slices TVM's ``compute_at`` gives the iterations add up to the stage
    (a grouped conv's loop over groups; no halo shared between iterations). It then runs in the
    same parallel region, its slice still in cache when the tile reads it; where iterations
    share a halo (rows of a depthwise conv) they would compute it twice, and slices of one small
    plane (``_MIN_SLICE``) do not pay. ``sch``: a trial schedule to ask instead of the builder's."""
    base = b.sch if sch is None else sch
    total = math.prod(lp.extent for lp in list_loops(base, block))
    try:
        trial = apply_step(base, loop_step("compute_at", b.kernel, block=block, target_block=m, loop=loop))
        loops = list_loops(trial, block)
    except LoopError:  # refused, or a slice whose size changes between iterations
        return False
    at = next((lp for lp in loops if lp.name == loop), None)
    piece = math.prod(lp.extent for lp in loops if lp.depth > at.depth) if at is not None else 0
    return piece >= _MIN_SLICE and at.extent * piece == total


def _plane_loops(b: _Builder, a: Analysis, m: str, outer: list[str], cores: int) -> int:
    """How many of the outer loops (outermost first) to fuse into the parallel loop, the others
    left serial inside it; 0 for all of them (the rule). Fewer where each iteration of the fused
    first ones pads a slice of its own and those of all the loops would share a halo (a
    depthwise conv: its channel planes, its blocks of rows), where one of those first loops moves
    every operand (a depthwise conv's channels; not the images of a batch, which share the
    weights: a batched plain conv keeps its rule), and given ``_TASKS_PER_CORE`` iterations per
    core: every padding stage then runs under the parallel loop, once per plane, its plane still
    in cache when the tile reads it."""
    if not a.before:
        return 0
    for k in range(len(outer), 0, -1):
        sch, loop = b.sch, outer[0]
        if k > 1:
            try:
                sch = apply_step(b.sch, loop_step("fuse", b.kernel, block=m, loops=outer[:k]))
            except LoopError:
                continue
            loop = "_".join(outer[:k]) + "_fused"
        if all(_reads_own_slice(b, blk, m, loop, sch) for blk in a.before):
            wide = next(lp.extent for lp in list_loops(sch, m) if lp.name == loop) >= _TASKS_PER_CORE * cores
            planes = any(all(r.strides.get(n, 0) for r in a.reads) for n in outer[:k])
            return k if k < len(outer) and wide and planes else 0
    return 0


def _grouped_rows(a: Analysis, t: Tile) -> bool:
    """Whether the tile's rows share the vector operand's loads only within runs shorter than
    their loop (a grouped conv's output channels: one group's input per run)."""
    return any(r.strides.get(t.rows_loop) == 0 and r.runs[t.rows_loop] < a.extent(t.rows_loop)
               for r in _vector_reads(a, t.vector))


def _pads(func: tirx.PrimFunc, block: str) -> bool:
    """Whether the block writes some elements from a condition (``if_then_else``: a pad)."""
    found: list[bool] = []
    visit_nodes(block_nest(func, block)[0].block.body,
                lambda n: found.append(True) if type(n).__name__ == "Call" and n.op.name.endswith(".if_then_else") else None)
    return bool(found)


def _parallel_pass(b: _Builder, block: str, vector: bool = True) -> None:
    """A block on its own loop nest: outer loops fused and parallel, the innermost vectorized."""
    loops = b.loops(block)
    names = [lp.name for lp in loops]
    if len(names) > 2 and b.attempt("fuse", block=block, loops=names[:-1]):
        names = ["_".join(names[:-1]) + "_fused", names[-1]]
    if len(names) > 1 or not vector:
        b.attempt("parallel", block=block, loop=names[0])
    if vector and len(names) > 1 and loops[-1].extent > 1:
        b.attempt("vectorize", block=block, loop=names[-1])
