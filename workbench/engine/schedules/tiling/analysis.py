"""The main block of a complex-op kernel, read for the expert template: ``main_block`` finds the
block with reduction iterators; ``analyse`` reads its loops and, for every buffer, the flat
stride of each loop (broadcast, contiguous or gather), its run and, where it is not affine, its
period (a transposed conv's stride phases: ``Analysis.phases``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from tvm import tirx
from tvm.sym import Analyzer

from ...base.errors import LoopError
from ...loops.primitives import LoopInfo, block_nest, list_blocks, list_loops, visit_nodes

__all__ = ["RUN_CAP", "Access", "Analysis", "analyse", "main_block", "plain_write", "vector_reads"]

#: longest run of a stride worth checking (longer runs behave the same for the template)
RUN_CAP = 256


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
        if s == 0 and self.runs.get(loop, RUN_CAP) >= width:
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
            # (a run as long as RUN_CAP is one that was not followed further, not a bend)
            bent = [r for r in self.reads if r.runs[lp.name] < min(lp.extent, RUN_CAP)]
            periods = {r.periods.get(lp.name) for r in bent}
            if len(bent) >= 2 and len(periods) == 1 and (s := periods.pop()) and lp.extent % s == 0:
                out[lp.name] = s
        return out


def main_block(func: tirx.PrimFunc) -> str | None:
    """The first block with a reduction iterator (a complex op), None when there is none.

    >>> from workbench.engine.schedules.tiling.steps import _example
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
        while stride is not None and run < min(extents[name], RUN_CAP) \
                and _at(off, {**zero, var: run}) == base + run * stride:
            run += 1
        strides[name], runs[name] = stride, run if extents[name] > 1 else RUN_CAP
        if run < min(extents[name], RUN_CAP) and (s := _period(off, var, zero, extents[name])):
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
    >>> from workbench.engine.schedules.tiling.steps import _example
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


def vector_reads(a: Analysis, vector: str) -> list[Access]:
    """The reads that change along the vector loop (the vector operands)."""
    return [r for r in a.reads if r.strides.get(vector) != 0]


def plain_write(a: Analysis) -> bool:
    """Whether the output is stored as its spatial loops run (dims in loop order, no layout)."""
    extents = [lp.extent for lp in a.spatial]
    return all(a.write.strides.get(lp.name) == math.prod(extents[i + 1:])
               for i, lp in enumerate(a.spatial) if lp.extent > 1)
