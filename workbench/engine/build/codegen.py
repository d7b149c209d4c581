"""From scheduled TIR to machine code: ``compile(mod, target)`` is ``tvm.compile`` with the
``"workbench"`` TIR pipeline, TVM's default (``s_tir``) pipeline then our ``PASSES``. None changes
a result: plain TVM applying an exported record gets the same results, the strided code kept.

>>> from tvm.script import tirx as T
>>> @T.prim_func(s_tir=True)
... def interleave(a: T.Buffer((3, 16), "float32"), b: T.Buffer((48,), "float32")):
...     for c in T.unroll(3):
...         for w in T.vectorized(16):
...             with T.sblock("b"):
...                 vc, vw = T.axis.remap("SS", [c, w])
...                 b[vw * 3 + vc] = a[vc, vw]
>>> "T.Shuffle" in lowered(interleave).script()
True
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import tvm
import tvm_ffi
from tvm import tirx
from tvm.sym import Analyzer

from .targets import target_from, vector_unit_of

__all__ = ["PIPELINE", "MOST_STORES", "BUILD_CANDIDATE", "build_candidate", "compile", "lowered",
           "merge_strided_stores", "MergeStridedStores", "dense_strided_loads", "DenseStridedLoads",
           "masked_loads", "MaskedLoads", "STACK_BYTES", "STACK_TOTAL", "small_buffers_on_stack", "SmallBuffersOnStack",
           "PASSES", "pipeline_of"]

#: the name our TIR pipeline is registered under (``tvm.tirx.get_tir_pipeline``)
PIPELINE = "workbench"
#: the most stores merged into one: a shuffle of more than 4 vectors is no longer a few permutes
MOST_STORES = 4
#: the largest buffer (bytes) a kernel allocates on its thread's stack instead of from TVM's
#: workspace pool (``SmallBuffersOnStack``): a register tile is at most 32 vector registers (2 KiB
#: of AVX-512), a cache tile of a few KiB stays well inside any thread's stack
STACK_BYTES = 16 * 1024
#: the most bytes of such buffers one function keeps on the stack (LLVM gives each its own slot
#: at the function's entry; a thread's stack is 8 MiB on Linux, far less on some systems)
STACK_TOTAL = 128 * 1024
#: the fewest lanes ``MaskedLoads`` widens (3 lanes load as 2 + 1: not worth a mask)
_FEWEST_MASKED = 5
#: TVM's own bound: a ``global`` buffer under 1 KiB is on the stack already
_TVM_STACK_BYTES = 1024
#: the allocation annotation that keeps TVM's ``LowerTVMBuiltin`` from taking a buffer from the
#: workspace pool
_ON_STACK = "disable_lower_builtin"
#: the call effects a merged value or a binding moved past a store may have (TVM's
#: ``TCallEffectKind``: 0 an annotation such as ``likely``, 1 pure); anything else (an extern
#: call, a pointer taken) keeps the stores as they are
_PURE = 1


def _strided(store: Any) -> Any:
    """The store's index when it is a single ramp of a constant stride and lane count, storing a
    value of as many lanes (not a buffer of vector elements), else None."""
    if not isinstance(store, tirx.BufferStore) or len(store.indices) != 1:
        return None
    index = store.indices[0]
    if not (isinstance(index, tirx.Ramp) and isinstance(index.stride, tirx.IntImm)
            and isinstance(index.lanes, tirx.IntImm)):
        return None
    value_lanes = getattr(getattr(getattr(store.value, "ty", None), "dtype", None), "lanes", None)
    return index if value_lanes == int(index.lanes) and getattr(store.buffer.dtype, "lanes", 1) == 1 else None


class _Storage:
    """Which buffers of a function may share memory: a buffer declared over another's data (a
    ``DeclBuffer`` whose ``data`` names another buffer, as TVM's views of an argument are) is one
    storage with it."""

    def __init__(self, func: tirx.PrimFunc) -> None:
        self.parent: dict[Any, Any] = {}
        tvm_ffi.structural_walk(func.body, [(tirx.DeclBuffer, self._declare)])

    def _declare(self, decl: Any) -> None:
        for var in _vars(decl.data):
            self.parent[self.root(decl.buffer)] = self.root(var)

    def root(self, var: Any) -> Any:
        while (up := next((p for v, p in self.parent.items() if v.same_as(var)), None)) is not None:
            var = up
        return var

    def touches(self, expr: Any, buffer: Any) -> bool:
        """Whether ``expr`` names ``buffer``'s storage anywhere: a load, a pointer, its data."""
        root = self.root(buffer)
        return any(self.root(v).same_as(root) for v in _vars(expr))


def _vars(expr: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.Var, found.append)])
    return found


def _pure(expr: Any) -> bool:
    """Whether every call in ``expr`` is to a TVM operator without side effects."""
    calls: list[Any] = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.Call, calls.append)])
    for call in calls:
        if not isinstance(call.op, tvm.ir.Op):
            return False
        effect = call.op.get_attr("TCallEffectKind")
        if effect is None or int(effect) > _PURE:
            return False
    return True


def _group(stmts: list[Any], at: int, ana: Analyzer, storage: _Storage) -> list[int]:
    """The positions of the stores from ``stmts[at]`` on that make one interleaved run, with only
    variable bindings between them (common subexpressions TVM hoisted, pure and not reading the
    run's buffer: the stores before them are moved after them); empty: none."""
    first = _strided(stmts[at])
    if first is None:
        return []
    k, lanes, buffer = int(first.stride.value), int(first.lanes), stmts[at].buffer
    if not 2 <= k <= MOST_STORES:
        return []
    found, pos = [], at
    while len(found) < k and pos < len(stmts):
        stmt = stmts[pos]
        if isinstance(stmt, tirx.Bind) and found and _pure(stmt.value) and not storage.touches(stmt.value, buffer):
            ana.bind(stmt.var, stmt.value)  # a base may be computed from it
            pos += 1
            continue
        index = _strided(stmt)
        if index is None or not stmt.buffer.same_as(buffer) or int(index.stride.value) != k \
                or int(index.lanes) != lanes or not ana.can_prove_equal(index.base, first.base + len(found)) \
                or not _pure(stmt.value) or storage.touches(stmt.value, buffer):
            return []
        found.append(pos)
        pos += 1
    return found if len(found) == k else []


def _merged(stmts: list[Any], ana: Analyzer, storage: _Storage) -> list[Any]:
    """``stmts`` with each interleaved run written as one store, after the bindings between its
    stores (no value reads the run's storage, so it may be computed later)."""
    out, at = [], 0
    while at < len(stmts):
        group = _group(stmts, at, ana, storage)
        if not group:
            out.append(stmts[at])
            at += 1
            continue
        stores = [stmts[i] for i in group]
        out += [stmts[i] for i in range(group[0], group[-1] + 1) if i not in group]  # the bindings
        first, k = _strided(stores[0]), len(stores)
        lanes = int(first.lanes)
        # lane i of store j goes to element i*k + j of the run
        order = [tirx.IntImm("int32", j * lanes + i) for i in range(lanes) for j in range(k)]
        value = tirx.Shuffle([s.value for s in stores], order)
        out.append(tirx.BufferStore(stores[0].buffer, value, [tirx.Ramp(first.base, 1, k * lanes)]))
        at = group[-1] + 1
    return out


def merge_strided_stores(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each run of ``k`` interleaved strided stores written as one dense store.

    ``k`` vector stores in a row that write one buffer at ``ramp(b + j, k, L)`` for ``j = 0 ..
    k-1`` (lanes ``k`` apart, bases consecutive: one dense run of ``k*L`` elements) become one
    dense store of an interleaving shuffle of their values: TVM stores a strided ramp lane by
    lane, a shuffle compiles to a few register permutes and ``k`` full-width stores. Such stores
    come from a conversion that interleaves a few source rows into one destination row, its rows
    the vector and its channels unrolled (``schedules.conversion``). No result changes: the merged store
    writes the same elements with the same values, and only stores whose values (and the bindings
    between them) do not name the storage they write, through any buffer over it, and call
    nothing with side effects are merged, so their order among themselves cannot matter."""
    ana, storage = Analyzer(), _Storage(func)

    def on_seq(seq: Any) -> Any:
        stmts = list(seq.seq)
        new = _merged(stmts, ana, storage)
        if len(new) == len(stmts):
            return seq
        return new[0] if len(new) == 1 else tirx.SeqStmt(new)

    body = tvm_ffi.structural_map(func.body, [(tirx.SeqStmt, on_seq)])
    return func if body.same_as(func.body) else func.with_body(body)


def _dense(load: Any) -> Any:
    """A load of ``ramp(b, s, L)`` (``s`` 2 to ``MOST_STORES``) as a dense load of the elements from
    its first lane's to its last's and a shuffle of every ``s``-th: no element outside the ones
    the lanes span is read."""
    index = load.indices[0] if len(load.indices) == 1 else None
    if not (isinstance(index, tirx.Ramp) and isinstance(index.stride, tirx.IntImm)
            and isinstance(index.lanes, tirx.IntImm)) or getattr(load.source.dtype, "lanes", 1) != 1 \
            or load.source.scope() != "global":  # a local tile: LLVM keeps it in registers already
        return load
    step, lanes = int(index.stride.value), int(index.lanes)
    if not 2 <= step <= MOST_STORES:
        return load
    span = tirx.BufferLoad(load.source, [tirx.Ramp(index.base, 1, step * (lanes - 1) + 1)])
    return tirx.Shuffle([span], [tirx.IntImm("int32", step * i) for i in range(lanes)])


def dense_strided_loads(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each load of a ramp of stride 2 to 4 read densely and shuffled: TVM loads
    such a ramp a lane at a time (a depthwise conv of stride 2 vectorized along its output's
    rows reads every other input element)."""
    calls: list[Any] = []
    tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, calls.append)])
    if any(isinstance(c.op, tvm.ir.Op) and c.op.name.endswith("address_of") for c in calls):
        return func  # a load whose address is taken must stay a load
    body = tvm_ffi.structural_map(func.body, [(tvm.ir.TensorLoad, _dense)])
    return func if body.same_as(func.body) else func.with_body(body)


def _masked(load: Any, lanes: int) -> Any:
    """A dense load of ``L`` elements, ``L`` not a power of two and at most ``lanes``, as a masked
    load of the next power of two (its extra lanes read nothing) and a shuffle of the first ``L``."""
    index = load.indices[0] if len(load.indices) == 1 else None
    if not (isinstance(index, tirx.Ramp) and isinstance(index.stride, tirx.IntImm) and int(index.stride.value) == 1
            and isinstance(index.lanes, tirx.IntImm)) or getattr(load.source.dtype, "lanes", 1) != 1 \
            or load.source.scope() != "global":  # a local tile: LLVM keeps it in registers already
        return load
    n = int(index.lanes)
    wide = 1 << (n - 1).bit_length()
    if wide == n or n < _FEWEST_MASKED or wide > lanes:
        return load
    i32 = lambda v: tirx.IntImm("int32", v)  # noqa: E731
    mask = tirx.Ramp(i32(0), i32(1), wide) < tirx.Broadcast(i32(n), wide)
    whole = tirx.op.masked_load(f"{load.source.dtype}x{wide}", load.source, tirx.Ramp(index.base, 1, wide), mask)
    return tirx.Shuffle([whole], [i32(i) for i in range(n)])


def masked_loads(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each dense vector load of 5-15 lanes (not a power of two) of a global buffer
    read as one masked load (``vmovups`` under a mask), on targets whose CPU masks lanes (AVX-512).
    LLVM otherwise splits such a load into loads of 8, 4, 2, 1 and inserts (ResNet-18's 3x3 conv on
    NCHW vectorizes its rows of 56 as 4 x 14)."""
    target = func.attrs.get("target") if func.attrs is not None else None
    if target is None or target.kind.name != "llvm" or (unit := vector_unit_of(target)).isa != "AVX-512":
        return func  # only AVX-512 masks the lanes of any load
    lanes = unit.lanes
    body = tvm_ffi.structural_map(func.body, [(tvm.ir.TensorLoad, lambda load: _masked(load, lanes))])
    return func if body.same_as(func.body) else func.with_body(body)


def _bytes(buffer: Any) -> int | None:
    """The buffer's size in bytes, or None when its shape is not constant."""
    if not all(isinstance(n, tirx.IntImm) for n in buffer.shape):
        return None
    dtype = buffer.dtype
    return math.prod(int(n) for n in buffer.shape) * dtype.bits // 8 * dtype.lanes


def small_buffers_on_stack(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each buffer of at most ``STACK_BYTES`` allocated on the stack, up to
    ``STACK_TOTAL`` bytes a function, on CPU targets (a GPU's host function hands its buffers to
    kernels: they stay where TVM puts them).

    TVM's ``LowerTVMBuiltin`` keeps only a ``global`` buffer under 1 KiB on the stack; any other
    (a ``local`` register tile, a slightly larger one) it takes from the runtime's workspace pool:
    a call to allocate it and one to free it each time it comes into scope, and LLVM, which cannot
    see that memory is private, writes the tile's zeros there with a ``memset``. A
    buffer allocated inside a parallel loop comes into scope once per iteration. LLVM places the
    stack slot at the function's entry (once per thread) and keeps a register tile in registers."""
    target = func.attrs.get("target") if func.attrs is not None else None
    if target is not None and target.kind.name not in ("llvm", "c"):
        return func
    total = [0]

    def on_stack(alloc: Any) -> Any:
        size = _bytes(alloc.buffer)
        if size is None or not 0 < size <= STACK_BYTES or total[0] + size > STACK_TOTAL \
                or _ON_STACK in alloc.annotations \
                or (alloc.buffer.scope() == "global" and size < _TVM_STACK_BYTES):  # TVM's own rule keeps it there
            return alloc
        total[0] += size
        return tirx.AllocBuffer(alloc.buffer, annotations={**alloc.annotations, _ON_STACK: tirx.IntImm("bool", 1)},
                                span=alloc.span)

    body = tvm_ffi.structural_map(func.body, [(tirx.AllocBuffer, on_stack)])
    return func if body.same_as(func.body) else func.with_body(body)


@tirx.transform.prim_func_pass(opt_level=0, name="MergeStridedStores")
def MergeStridedStores(func: tirx.PrimFunc, _mod: Any, _ctx: Any) -> tirx.PrimFunc:  # noqa: N802 - a TVM pass
    return merge_strided_stores(func)


@tirx.transform.prim_func_pass(opt_level=0, name="DenseStridedLoads")
def DenseStridedLoads(func: tirx.PrimFunc, _mod: Any, _ctx: Any) -> tirx.PrimFunc:  # noqa: N802 - a TVM pass
    return dense_strided_loads(func)


@tirx.transform.prim_func_pass(opt_level=0, name="MaskedLoads")
def MaskedLoads(func: tirx.PrimFunc, _mod: Any, _ctx: Any) -> tirx.PrimFunc:  # noqa: N802 - a TVM pass
    return masked_loads(func)


@tirx.transform.prim_func_pass(opt_level=0, name="SmallBuffersOnStack")
def SmallBuffersOnStack(func: tirx.PrimFunc, _mod: Any, _ctx: Any) -> tirx.PrimFunc:  # noqa: N802 - a TVM pass
    return small_buffers_on_stack(func)


#: our passes, in the order they run after TVM's default pipeline
PASSES = (MergeStridedStores, MaskedLoads, DenseStridedLoads, SmallBuffersOnStack)


def pipeline_of(passes: tuple = PASSES) -> Any:
    """A TIR pipeline maker (for ``tvm.tirx.register_tir_pipeline``): TVM's default pipeline,
    then ``passes`` (ours by default; a study registers a subset to compare against)."""

    def make(**kwargs: Any) -> tuple[Any, Any, Any]:
        default, host, device = tvm.tirx.get_tir_pipeline("s_tir", **kwargs)
        return tvm.transform.Sequential([default, *passes]), host, device

    return make


_pipeline = pipeline_of()


tvm.tirx.register_tir_pipeline(PIPELINE, _pipeline)


#: the name MetaSchedule's build workers find ``build_candidate`` under (``LocalBuilder``'s
#: ``f_build``; a worker registers it by importing this module)
BUILD_CANDIDATE = "workbench.build_candidate"


@tvm_ffi.register_global_func(BUILD_CANDIDATE, override=True)
def build_candidate(mod: tvm.IRModule, target: tvm.target.Target, _params: Any = None) -> Any:
    """MetaSchedule's ``default_build`` through our pipeline, so that a tuning measures each
    candidate as the workbench will build it."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return tvm_build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target, pipeline=PIPELINE)


def compile(mod: tvm.IRModule, target: Mapping | tvm.target.Target) -> Any:  # noqa: A001 - tvm.compile's counterpart
    """``tvm.compile(mod, target)`` through our TIR pipeline (Relax or TIR modules alike); the
    target a session's JSON dict or a TVM target."""
    tgt = target if isinstance(target, tvm.target.Target) else target_from(target)
    return tvm.compile(mod, target=tgt, tir_pipeline=PIPELINE)


def lowered(func: tirx.PrimFunc, target: Mapping | None = None) -> tirx.PrimFunc:
    """``func`` after our TIR pipeline (what LLVM is handed), for reading and for tests."""
    tgt = target_from(target or {"kind": "llvm"})
    mod = tirx.transform.BindTarget(tgt.with_host(tgt))(tvm.IRModule({"main": func}))
    return tvm.tirx.get_tir_pipeline(PIPELINE)[0](mod)["main"]
