"""From scheduled TIR to machine code: TVM's own lowering pipeline plus one pass of ours.

``compile(mod, target)`` is ``tvm.compile`` with the ``"workbench"`` TIR pipeline: TVM's default
(``s_tir``) pipeline followed by ``MergeStridedStores``. That pass finds ``k`` vector stores in a
row that write the same buffer at ``ramp(b + j, k, L)`` for ``j = 0 .. k-1`` (each lane ``k``
elements apart, their bases consecutive: together one dense run of ``k*L`` elements) and writes
them as a single dense store of an interleaving shuffle of their values. TVM stores a strided
ramp lane by lane (``L`` scalar stores each); one dense store of a shuffle compiles to a few
register permutes (``vpermt2ps`` on AVX-512) and ``k`` full-width stores. Where it comes from:
a conversion that interleaves a few source rows into one destination row (ALT's stem unfold,
3 channel planes -> rows of 37 W x 3 channels), scheduled with the rows as the vector and the
channels unrolled (``expert.convert``): 63% -> 84% of a copy timed beside it on the Xeon.

The pass changes no result: the merged store writes exactly the elements the ``k`` stores
wrote, with the same values, and it merges only stores whose values do not read the buffer they
write (so their order among themselves cannot matter). Built with plain TVM (a MetaSchedule
record applied elsewhere), the same kernels give the same results, only the strided stores stay.

>>> import tvm
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

from typing import Any, Mapping

import tvm
import tvm_ffi
from tvm import tirx
from tvm.sym import Analyzer

from .targets import target_from

__all__ = ["PIPELINE", "compile", "lowered", "merge_strided_stores", "MergeStridedStores"]

#: the name our TIR pipeline is registered under (``tvm.tirx.get_tir_pipeline``)
PIPELINE = "workbench"
#: the most stores merged into one: a shuffle of more than 4 vectors is no longer a few permutes
_MOST_STORES = 4


def _strided(store: Any) -> Any:
    """The store's index when it is a single ramp with a constant stride, else None."""
    if not isinstance(store, tirx.BufferStore) or len(store.indices) != 1:
        return None
    index = store.indices[0]
    return index if isinstance(index, tirx.Ramp) and isinstance(index.stride, tirx.IntImm) else None


def _reads(expr: Any, buffer: Any) -> bool:
    """Whether ``expr`` loads from ``buffer`` (0.27: a buffer is a variable; loads name it ``source``)."""
    found: list[Any] = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.TensorLoad, lambda n: found.append(n) if n.source.same_as(buffer) else None)])
    return bool(found)


def _group(stmts: list[Any], at: int, ana: Analyzer) -> list[int]:
    """The positions of the stores from ``stmts[at]`` on that make one interleaved run, with only
    variable bindings between them (common subexpressions TVM hoisted); empty: none."""
    first = _strided(stmts[at])
    if first is None:
        return []
    k, lanes = int(first.stride.value), int(first.lanes)
    if not 2 <= k <= _MOST_STORES:
        return []
    found, pos = [], at
    while len(found) < k and pos < len(stmts):
        store = stmts[pos]
        if isinstance(store, tirx.Bind) and found and not _reads(store.value, stmts[at].buffer):
            pos += 1
            continue
        index = _strided(store)
        if index is None or not store.buffer.same_as(stmts[at].buffer) or int(index.stride.value) != k \
                or int(index.lanes) != lanes or not ana.can_prove_equal(index.base, first.base + len(found)) \
                or _reads(store.value, store.buffer):
            return []
        found.append(pos)
        pos += 1
    return found if len(found) == k else []


def _merged(stmts: list[Any], ana: Analyzer) -> list[Any]:
    """``stmts`` with each interleaved run written as one store, after the bindings between its
    stores (each value reads no buffer the run writes, so it may be computed later)."""
    out, at = [], 0
    while at < len(stmts):
        group = _group(stmts, at, ana)
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
    """``func`` with each run of ``k`` interleaved strided stores written as one dense store."""
    ana = Analyzer()

    def on_seq(seq: Any) -> Any:
        stmts = list(seq.seq)
        new = _merged(stmts, ana)
        if len(new) == len(stmts):
            return seq
        return new[0] if len(new) == 1 else tirx.SeqStmt(new)

    body = tvm_ffi.structural_map(func.body, [(tirx.SeqStmt, on_seq)])
    return func if body.same_as(func.body) else func.with_body(body)


@tirx.transform.prim_func_pass(opt_level=0, name="MergeStridedStores")
def MergeStridedStores(func: tirx.PrimFunc, _mod: Any, _ctx: Any) -> tirx.PrimFunc:  # noqa: N802 - a TVM pass
    return merge_strided_stores(func)


def _pipeline() -> tuple[Any, Any, Any]:
    default, host, device = tvm.tirx.get_tir_pipeline("s_tir")
    return tvm.transform.Sequential([default, MergeStridedStores]), host, device


tvm.tirx.register_tir_pipeline(PIPELINE, _pipeline)


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
