"""The analytic schedule of the fused attention kernel (``ops_decoder``'s grouped-query attention):
its five stages (scores, row max, row sum of exp, probabilities, product with V) blocked by query
rows, in the manner of FlashAttention-2's outer loop but over the existing stages (no online
softmax: that would change the compute, not the schedule).

``attention_steps(func, kernel, target)``: the output's head and query-block loops fused and run
in parallel; every stage computed under that loop, so a block's scores and probabilities stay in
L1/L2 between the stages; the scores' keys a vector (by the target's lanes, where they divide)
accumulated over the head dim, the probabilities' key loop and the output's head-dim loop
vectorized. A decode step (one query) is
a query block of one: the heads alone are parallel.
"""

from __future__ import annotations

from typing import Mapping

from tvm import tirx

from ..base.errors import LoopError
from ..base.step import Step
from ..build.targets import target_cores, vector_unit
from ..loops.primitives import list_blocks, list_loops
from .builder import KernelStepBuilder

__all__ = ["ATTENTION_BLOCKS", "attention_steps", "is_attention", "query_block"]

#: the attention kernel's blocks, in order (``ops_decoder._attn_compute``'s stage names)
ATTENTION_BLOCKS = ("attn_qk", "attn_max", "attn_sum", "attn_prob")
#: bytes of one query block's scores and probabilities aimed for (about half a 32 KiB L1d)
_BLOCK_BYTES = 16 * 1024


def is_attention(func: tirx.PrimFunc) -> bool:
    """Whether ``func`` is the attention kernel alone (its four stages and the output block)
    writing its output as (..., heads, queries, head dim): what ``attention_steps`` schedules."""
    blocks = list_blocks(func)
    return tuple(blocks[:-1]) == ATTENTION_BLOCKS and not _laid_out(func, blocks[-1])


def _laid_out(func: tirx.PrimFunc, out: str) -> bool:
    """Whether the output's loops are not the scores' (..., queries) then the head dim: an output
    stored in another layout (its loops follow that layout's dims)."""
    scores = [lp.extent for lp in list_loops(func, "attn_qk") if not lp.reduction]
    written = [lp.extent for lp in list_loops(func, out) if not lp.reduction]
    return len(written) != len(scores) or written[:-1] != scores[:-1]


def query_block(queries: int, keys: int) -> int:
    """Query rows per block: a divisor of ``queries`` whose scores and probabilities (two rows of
    ``keys`` floats each) fit ``_BLOCK_BYTES``; at least one.

    >>> query_block(128, 128), query_block(1, 129), query_block(37, 37)
    (16, 1, 37)
    """
    cap = max(1, _BLOCK_BYTES // (2 * 4 * keys))
    return max(d for d in range(1, min(queries, cap) + 1) if queries % d == 0)


def attention_steps(func: tirx.PrimFunc, kernel: str, target: Mapping) -> list[Step]:
    """Loop steps for the attention kernel (see the module docstring). Raises ``LoopError`` for
    another kernel, or an attention output stored in another layout.

    >>> from workbench.engine.schedules.attention import _example
    >>> for s in attention_steps(_example(), "attn", {"kind": "llvm", "mcpu": "haswell", "num-cores": 2})[:5]:
    ...     print(s)
    split(block='op', loop='i2', factors=[None, 32])
    reorder(block='op', loops=['i0', 'i1', 'i2_0', 'i2_1', 'r_attn_t', 'i3'])
    fuse(block='op', loops=['i0', 'i1', 'i2_0'])
    parallel(block='op', loop='i0_i1_i2_0_fused')
    vectorize(block='op', loop='i3')
    """
    blocks = list_blocks(func)
    if tuple(blocks[:-1]) != ATTENTION_BLOCKS:
        raise LoopError(f"kernel {kernel!r} is not an attention kernel alone (blocks {blocks}); "
                        f"attention_steps wants {list(ATTENTION_BLOCKS)} then the output")
    out = blocks[-1]
    if _laid_out(func, out):
        raise LoopError(f"kernel {kernel!r} writes its attention output in another layout: attention_steps "
                        "blocks the queries of an output stored (..., heads, queries, head dim)")
    lanes, cores = vector_unit(target).lanes, target_cores(target)
    b = KernelStepBuilder(func, kernel)
    *lead, s, d, t = (lp.name for lp in b.loops(out))
    qb = query_block(b.loops(out)[-3].extent, b.loops("attn_qk")[-2].extent)
    # 1. the output: (lead, heads, query blocks) outside, then a block's rows, the keys, the head dim
    outer = list(lead)
    if qb < b.loops(out)[-3].extent:
        b.do("split", block=out, loop=s, factors=[None, qb])
        s, s_i = (lp.name for lp in b.loops(out)[len(lead):len(lead) + 2])
        b.do("reorder", block=out, loops=[*lead, s, s_i, t, d])
        outer.append(s)
    else:
        b.do("reorder", block=out, loops=[*lead, s, t, d])
    if len(outer) > 1:
        b.do("fuse", block=out, loops=outer)
    row = b.loops(out)[0].name
    if cores > 1 and b.loops(out)[0].extent > 1:
        b.do("parallel", block=out, loop=row)
    # vectorized before the stages move in: TVM refuses it once the loop holds other blocks
    b.do("vectorize", block=out, loop=d)
    # 2. every stage per query block, consumers first
    for producer in reversed(ATTENTION_BLOCKS):
        b.do("compute_at", block=producer, target_block=out, loop=row)
    b.do("vectorize", block="attn_prob", loop=b.loops("attn_prob")[-1].name)
    # 3. the scores: a vector of keys accumulated over the head dim (Q broadcast, K read through
    # a copy per query block that holds its keys contiguous)
    _transposed_keys(b, out, row, dims=sum(not lp.reduction for lp in list_loops(func, "attn_qk")))
    _score_vectors(b, lanes)
    return b.steps


def _transposed_keys(b: KernelStepBuilder, out: str, row: str, dims: int) -> None:
    """The scores read K (..., keys, head dim) along the keys, the vector: a gather. Copy each
    query block's K into a buffer stored (..., head dim, keys), under the block's loop, and read
    that instead (a copy of keys x head dim floats per block, against rows x that in FMAs). Left
    out where TVM refuses a step (K read through a layout). ``dims``: K's rank (the scores')."""
    before, steps = b.sch, len(b.steps)
    blocks = set(list_blocks(b.sch))
    try:
        b.do("cache_read", block="attn_qk", read_index=1, scope="local")
        (copy,) = [blk for blk in list_blocks(b.sch) if blk not in blocks]
        b.do("compute_at", block=copy, target_block=out, loop=row)
        b.do("transform_layout", block=copy, write_index=0, factors=[1] * dims,
             perm=[*range(dims - 2), dims - 1, dims - 2])
    except (LoopError, ValueError):
        b.sch, b.steps[steps:] = before, []


def _score_vectors(b: KernelStepBuilder, lanes: int) -> None:
    """The scores' key loop split by ``lanes`` and vectorized inside the head-dim loop; keys that
    no whole vector covers (a decode step's cache and its own position) partitioned off first,
    left scalar."""
    block = "attn_qk"
    *_, keys, dim = b.loops(block)
    whole = keys.extent - keys.extent % lanes
    if whole == 0:
        return
    if whole < keys.extent:
        b.do("loop_partition", block=block, loop=keys.name, factors=[whole, None])
        block = f"{block}_{keys.name}0"
        *_, keys, dim = b.loops(block)
    b.do("split", block=block, loop=keys.name, factors=[None, lanes])
    k_o, k_i = (lp.name for lp in b.loops(block)[-3:-1])
    b.do("reorder", block=block, loops=[k_o, dim.name, k_i])
    b.do("vectorize", block=block, loop=k_i)


def _example() -> tirx.PrimFunc:
    """The unscheduled attention kernel of one prefill: 4 query heads over 2 K/V heads, 64 tokens."""
    from ..build.program import make_program
    from ..ir.graph import GraphBuilder

    g = GraphBuilder("attn")
    q, k, v = (g.input(n, (1, h, 64, 32)) for n, h in (("q", 4), ("k", 2), ("v", 2)))
    g.op("op", "attention", q, k, v, causal=True)
    return make_program(g.build()).funcs["op"]
