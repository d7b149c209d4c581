"""The loop primitives as functions named as TVM's ``tvm.s_tir.Schedule`` methods, taking their
spec's arguments: typed entry points for a notebook, each with one executed example of what it
does to a loop nest.

Each function is ``apply_step`` of the matching ``loop_step``: it schedules a copy, and raises
``LoopError`` as ``apply_step`` does. The examples start from three tiny kernels made in
``workbench/conftest.py``: ``double`` (B = A * 2 on 64 elements), ``chain`` (Y = X * 2, then
Z = Y + 1, on 16 x 16) and ``matmul`` (C = A @ B, 16 x 16, reducing over ``k``):

>>> print(outline(double))
for i in range(64):
  block B: B[i] = A[i] * 2.0
"""

from __future__ import annotations

from collections.abc import Sequence

from tvm import s_tir

from .apply import apply_step
from .nest import FuncOrSchedule
from .outline import outline
from .specs import loop_step

__all__ = ["outline", "split", "loop_partition", "reorder", "fuse", "vectorize", "unroll", "parallel", "cache_read",
           "cache_write", "compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline",
           "decompose_reduction", "transform_layout"]


def split(func_or_sch: FuncOrSchedule, block: str, loop: str, factors: Sequence[int | None]) -> s_tir.Schedule:
    """Split a loop into loops ``<loop>_0``, ``<loop>_1``, ...; requires 2 or more positive factors,
    outermost first, whose product is its extent. One may be None: inferred, rounded up (the block
    then gets a predicate, ``# where`` in ``outline``).

    >>> print(outline(split(double, "B", "i", [None, 20])))
    for i_0 in range(4):
      for i_1 in range(20):
        block B: B[i_0 * 20 + i_1] = A[i_0 * 20 + i_1] * 2.0  # where i_0 * 20 + i_1 < 64
    """
    return apply_step(func_or_sch, loop_step("split", block=block, loop=loop, factors=factors))


def loop_partition(func_or_sch: FuncOrSchedule, block: str, loop: str, factors: Sequence[int | None]) -> s_tir.Schedule:
    """Cut a serial loop into loops over consecutive ranges, each with its own copy of the body;
    requires 2 or more positive counts that add up to its extent (one may be None: the rest).
    Within a copy TVM knows its range: a padded border's reads apart from the interior's.

    >>> print(outline(loop_partition(double, "B", "i", [1, None])))
    block B_i_common
      block B_i0_partition
        for i0 in range(1):
          block B_i0: B[i0] = A[i0] * 2.0
      block B_i1_partition
        for i1 in range(1, 64):
          block B_i1: B[i1] = A[i1] * 2.0
    """
    return apply_step(func_or_sch, loop_step("loop_partition", block=block, loop=loop, factors=factors))


def reorder(func_or_sch: FuncOrSchedule, block: str, loops: Sequence[str]) -> s_tir.Schedule:
    """Put loops of a block in this order, outermost first, in the places the same loops held (the
    others stay); requires each loop once, all in one single-branch chain.

    >>> print(outline(reorder(matmul, "C", ["k", "i"])))
    for k in range(16):
      for j in range(16):
        for i in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[k, j]
    """
    return apply_step(func_or_sch, loop_step("reorder", block=block, loops=loops))


def fuse(func_or_sch: FuncOrSchedule, block: str, loops: Sequence[str]) -> s_tir.Schedule:
    """Fuse loops into one, ``<loop>_<loop>_..._fused``; requires 2 or more consecutive loops of a
    block, outermost first.

    >>> print(outline(fuse(chain, "Z", ["i", "j"])))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
    for i_j_fused in range(256):
      block Z: Z[i_j_fused // 16, i_j_fused % 16] = Y[i_j_fused // 16, i_j_fused % 16] + 1.0
    """
    return apply_step(func_or_sch, loop_step("fuse", block=block, loops=loops))


def vectorize(func_or_sch: FuncOrSchedule, block: str, loop: str) -> s_tir.Schedule:
    """Run a loop's iterations as SIMD lanes; requires a spatial loop (not feeding a reduction).

    >>> print(outline(vectorize(split(double, "B", "i", [None, 16]), "B", "i_1")))
    for i_0 in range(4):
      for i_1 in range(16):  # vectorized
        block B: B[i_0 * 16 + i_1] = A[i_0 * 16 + i_1] * 2.0
    """
    return apply_step(func_or_sch, loop_step("vectorize", block=block, loop=loop))


def unroll(func_or_sch: FuncOrSchedule, block: str, loop: str) -> s_tir.Schedule:
    """Unroll a loop; requires a loop of the block (spatial or reduction).

    >>> print(outline(unroll(double, "B", "i")))
    for i in range(64):  # unrolled
      block B: B[i] = A[i] * 2.0
    """
    return apply_step(func_or_sch, loop_step("unroll", block=block, loop=loop))


def parallel(func_or_sch: FuncOrSchedule, block: str, loop: str) -> s_tir.Schedule:
    """Run a loop's iterations on several cores; requires a spatial loop (not feeding a reduction).

    >>> print(outline(parallel(double, "B", "i")))
    for i in range(64):  # parallel
      block B: B[i] = A[i] * 2.0
    """
    return apply_step(func_or_sch, loop_step("parallel", block=block, loop=loop))


def cache_read(func_or_sch: FuncOrSchedule, block: str, read_index: int, scope: str = "global") -> s_tir.Schedule:
    """Read one input of a block (its ``read_index``-th ``T.reads``) through a copy in ``scope``, made
    by a new block ``<buffer>_<scope>`` over loops ``ax0, ax1, ...`` (``compute_at`` moves it under a
    loop, to copy one tile at a time); requires a read index of the block, a scope TVM knows.

    >>> print(outline(cache_read(double, "B", 0)))
    for ax0 in range(64):
      block A_global: A_global[ax0] = A[ax0]
    for i in range(64):
      block B: B[i] = A_global[i] * 2.0
    """
    return apply_step(func_or_sch, loop_step("cache_read", block=block, read_index=read_index, scope=scope))


def cache_write(func_or_sch: FuncOrSchedule, block: str, write_index: int, scope: str = "global") -> s_tir.Schedule:
    """Write one output of a block (its ``write_index``-th ``T.writes``) through a copy in ``scope``,
    copied out by a new block ``<buffer>_<scope>`` over loops ``ax0, ax1, ...``
    (``reverse_compute_at`` moves it under a loop); requires a write index of the block, a scope
    TVM knows.

    >>> print(outline(cache_write(double, "B", 0)))
    for i in range(64):
      block B: B_global[i] = A[i] * 2.0
    for ax0 in range(64):
      block B_global: B[ax0] = B_global[ax0]
    """
    return apply_step(func_or_sch, loop_step("cache_write", block=block, write_index=write_index, scope=scope))


def compute_at(func_or_sch: FuncOrSchedule, block: str, target_block: str, loop: str) -> s_tir.Schedule:
    """Compute a producer, per iteration of a loop of its consumer ``target_block``, where that
    iteration reads it (new loops ``ax0, ...``); requires a block that is not an output, all its
    consumers under the loop.

    >>> print(outline(compute_at(chain, "Y", "Z", "i")))
    for i in range(16):
      for ax0 in range(16):
        block Y: Y[i, ax0] = X[i, ax0] * 2.0
      for j in range(16):
        block Z: Z[i, j] = Y[i, j] + 1.0
    """
    return apply_step(func_or_sch, loop_step("compute_at", block=block, target_block=target_block, loop=loop))


def reverse_compute_at(func_or_sch: FuncOrSchedule, block: str, target_block: str, loop: str) -> s_tir.Schedule:
    """Compute a consumer, after each iteration of a loop of its producer ``target_block``, on what
    that iteration wrote (new loops ``ax0, ...``); requires all its producers under the loop.

    >>> print(outline(reverse_compute_at(chain, "Z", "Y", "i")))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
      for ax0 in range(16):
        block Z: Z[i, ax0] = Y[i, ax0] + 1.0
    """
    return apply_step(func_or_sch, loop_step("reverse_compute_at", block=block, target_block=target_block, loop=loop))


def compute_inline(func_or_sch: FuncOrSchedule, block: str) -> s_tir.Schedule:
    """Inline a producer into its consumers, which compute its value where they read it; requires
    an element-wise block (no init) that is not an output.

    >>> print(outline(compute_inline(chain, "Y")))
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = X[i, j] * 2.0 + 1.0
    """
    return apply_step(func_or_sch, loop_step("compute_inline", block=block))


def reverse_compute_inline(func_or_sch: FuncOrSchedule, block: str) -> s_tir.Schedule:
    """Inline a consumer into its producer, which then stores into the consumer's output; requires
    an element-wise block (no init) reading one region of one buffer, written by a complete block
    with no other consumer.

    >>> print(outline(reverse_compute_inline(chain, "Z")))
    for i in range(16):
      for j in range(16):
        block Y: Z[i, j] = X[i, j] * 2.0 + 1.0
    """
    return apply_step(func_or_sch, loop_step("reverse_compute_inline", block=block))


def decompose_reduction(func_or_sch: FuncOrSchedule, block: str, loop: str) -> s_tir.Schedule:
    """Move a reduction's init above a loop, as a block ``<block>_init`` under copies of the spatial
    loops it held (``<loop>_init``); the block becomes ``<block>_update``. Requires a reduction
    block and a loop outside its reduction loops.

    >>> print(outline(decompose_reduction(matmul, "C", "j")))
    for i in range(16):
      for j_init in range(16):
        block C_init: C[i, j_init] = 0.0
      for j in range(16):
        for k in range(16):
          block C_update: C[i, j] = C[i, j] + A[i, k] * B[k, j]
    """
    return apply_step(func_or_sch, loop_step("decompose_reduction", block=block, loop=loop))


def transform_layout(func_or_sch: FuncOrSchedule, block: str, write_index: int, factors: Sequence[int],
                     perm: Sequence[int]) -> s_tir.Schedule:
    """Store a buffer the kernel allocates (the block's ``write_index``-th write, e.g. a cache_write's
    tile) with each dim ``d`` split into ``(d // f, d % f)`` where its factor ``f`` is above 1, the
    dims then in the order ``perm``; every access follows. Requires a buffer that is not an argument
    of the kernel (that is a layout action), one factor per dim dividing it.

    >>> print(outline(transform_layout(chain, "Y", 0, [1, 4], [0, 2, 1])))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j % 4, j // 4] = X[i, j] * 2.0
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = Y[i, j % 4, j // 4] + 1.0
    """
    return apply_step(func_or_sch, loop_step("transform_layout", block=block, write_index=write_index,
                                             factors=list(factors), perm=list(perm)))
