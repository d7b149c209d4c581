"""The loop primitives as functions, one per ``PRIMITIVES`` entry, named as TVM's
``tvm.s_tir.Schedule`` methods and taking their spec's arguments, and ``outline``, a compact
text form of a loop nest.

Each function is ``apply_step`` of the matching ``loop_step``: it schedules a copy (or a new
schedule of a function), addresses blocks and loops by name (``loops.list_blocks``,
``loops.list_loops``), and raises ``LoopError`` naming the step and the reason. The examples are
doctests on three tiny kernels made in ``workbench/conftest.py``: ``double`` (B = A * 2 on 64
elements), ``chain`` (Y = X * 2, then Z = Y + 1, on 16 x 16) and ``matmul`` (C = A @ B, 16 x 16):

>>> print(outline(double))
for i in range(64):
  block B: B[i] = A[i] * 2.0
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from tvm import s_tir, tirx
from tvm.sym import Analyzer

from .primitives import FuncOrSchedule, LoopInfo, apply_step, apply_steps, list_loops, loop_step, walk_nest

__all__ = ["outline", "split", "loop_partition", "reorder", "fuse", "vectorize", "unroll", "parallel", "cache_read",
           "cache_write", "compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline", "decompose_reduction",
           "transform_layout"]


########## Outline: a loop nest in a few lines ##########

# float32 is te's default dtype: its literals read as plain numbers
_FLOAT32 = re.compile(r"T\.float32\(([^()]*)\)")
_INDENT = "  "


@dataclass
class _Scope:
    """The body of one block: its indentation and the loops of the last block written in it."""

    depth: int
    shown: list[tirx.For] = field(default_factory=list)


def outline(func_or_sch: FuncOrSchedule) -> str:
    """The loop nest in a few lines: each loop, then each block with its stores.

    A loop reads ``for i_0 in range(4):``, followed by its kind when it is not serial
    (``# vectorized``, ``# parallel``, ``# unrolled``); its name is the one ``list_loops`` gives
    (and primitives take). A block reads ``block B: B[i_0 * 16 + i_1] = A[i_0 * 16 + i_1] * 2.0``,
    its indices and values in loop variables; a block with an init (a reduction) or several
    stores gets one line each under ``block C:``, and a predicate as ``# where ...``. The root
    block is left out.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule

    Returns
    -------
    str
        The same for the same kernel (no addresses, no trace).

    Raises
    ------
    LoopError
        When ``func_or_sch`` is none of these.

    Examples
    --------
    >>> print(outline(matmul))
    for i in range(16):
      for j in range(16):
        for k in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[k, j]
    """
    func = apply_steps(func_or_sch, []).mod["main"]  # any of the three, read as loops reads it
    lines: list[str] = []

    def on_loop(loop: tirx.For, ctx: tuple[_Scope, list[tirx.For]]) -> tuple[_Scope, list[tirx.For]]:
        return ctx[0], ctx[1] + [loop]

    def on_block(realize: s_tir.SBlockRealize, ctx: tuple[_Scope, list[tirx.For]]) -> tuple[_Scope, list[tirx.For]]:
        scope, path = ctx
        if realize.same_as(func.body):
            return _Scope(0), []
        # loops are written when the first block under them is reached: list_loops names them then
        infos = list_loops(func, realize.block.name_hint)
        shared = len(list(itertools.takewhile(lambda pair: pair[0].same_as(pair[1]), zip(path, scope.shown))))
        lines.extend(_loop_line(loop, info, scope.depth + d) for d, (loop, info) in enumerate(zip(path, infos))
                     if d >= shared)
        scope.shown = path
        lines.extend(_block_lines(realize, path, infos, scope.depth + len(path)))
        return _Scope(scope.depth + len(path) + 1), []

    walk_nest(func, on_block, on_loop, (_Scope(0), []))
    return "\n".join(lines)


def _loop_line(loop: tirx.For, info: LoopInfo, depth: int) -> str:
    start = int(loop.min)
    bounds = f"{info.extent}" if start == 0 else f"{start}, {start + info.extent}"
    kind = "" if info.kind == "serial" else f"  # {info.kind}"
    return f"{_INDENT * depth}for {info.name} in range({bounds}):{kind}"


def _block_lines(realize: s_tir.SBlockRealize, loops: list[tirx.For], infos: list[LoopInfo],
                 depth: int) -> list[str]:
    """The block's line(s), its block variables replaced by the loop expressions bound to them."""
    block, subst = realize.block, Analyzer()
    for loop, info in zip(loops, infos):
        if info.name != loop.loop_var.name:  # a name reused further out prints as ax0_1, as in list_loops
            subst.bind(loop.loop_var, tirx.Var(info.name, loop.loop_var.ty))
    for iv, value in zip(block.iter_vars, realize.iter_values):
        subst.bind(iv.var, value)

    def text(expr: tirx.Expr) -> str:
        # TVM 0.27 has no Python substitute(): the analyzer's rewrite replaces the bound variables
        return _FLOAT32.sub(r"\1", str(subst.rewrite_simplify(expr)))

    def store(s: tirx.BufferStore) -> str:
        return f"{s.buffer.name}[{', '.join(text(i) for i in s.indices)}] = {text(s.value)}"

    body = list(block.body.seq) if isinstance(block.body, tirx.SeqStmt) else [block.body]
    stores = [store(s) for s in body if isinstance(s, tirx.BufferStore)]
    init = [f"init: {store(block.init)}"] if isinstance(block.init, tirx.BufferStore) else []
    pred = realize.predicate
    where = "" if isinstance(pred, tirx.IntImm) and pred.value == 1 else f"  # where {text(pred)}"
    head = f"{_INDENT * depth}block {block.name_hint}"
    if not init and len(body) == len(stores) == 1:
        return [f"{head}: {stores[0]}{where}"]
    return [f"{head}{':' if init or stores else ''}{where}"] + [_INDENT * (depth + 1) + s for s in init + stores]


########## The primitives ##########

def split(func_or_sch: FuncOrSchedule, block: str, loop: str, factors: Sequence[int | None]) -> s_tir.Schedule:
    """Split a loop into consecutive loops; requires 2 or more positive factors whose product is its extent.

    One factor may be ``None`` (TVM also takes ``-1``): it is inferred, rounded up, and when
    it does not divide the extent the block gets a predicate (``# where`` in ``outline``).
    The new loops are named ``<loop>_0``, ``<loop>_1``, ...

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A block under the loop.
    loop : str
        The loop to split, one of ``list_loops(func_or_sch, block)``.
    factors : sequence of int or None
        Extents of the new loops, outermost first.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the split.

    Raises
    ------
    LoopError
        Fewer than two factors, a factor that is not positive, two ``None``, a product other than
        the extent (or above it, with a ``None``), an unknown block or loop.

    Examples
    --------
    Before split:

    >>> print(outline(double))
    for i in range(64):
      block B: B[i] = A[i] * 2.0

    After ``split(double, "B", "i", [None, 16])``:

    >>> print(outline(split(double, "B", "i", [None, 16])))
    for i_0 in range(4):
      for i_1 in range(16):
        block B: B[i_0 * 16 + i_1] = A[i_0 * 16 + i_1] * 2.0
    >>> print(outline(split(double, "B", "i", [None, 20])))
    for i_0 in range(4):
      for i_1 in range(20):
        block B: B[i_0 * 20 + i_1] = A[i_0 * 20 + i_1] * 2.0  # where i_0 * 20 + i_1 < 64
    >>> split(double, "B", "i", [3, 16])
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: split(block='B', loop='i', factors=[3, 16]): split factors [3, 16] multiply to 48 but loop 'i' has extent 64
    """
    return apply_step(func_or_sch, loop_step("split", block=block, loop=loop, factors=factors))


def loop_partition(func_or_sch: FuncOrSchedule, block: str, loop: str, factors: Sequence[int | None]) -> s_tir.Schedule:
    """Cut a loop into consecutive loops over consecutive ranges, each with its own copy of the
    body; requires 2 or more positive counts that add up to its extent, and a serial loop.

    One count may be ``None``: the rest. The copies are blocks ``<block>_<loop>0``,
    ``<block>_<loop>1``, ... (each under a wrapper block ``..._partition``, all under
    ``<block>_<loop>_common``), their loops ``<loop>0``, ``<loop>1``, ... over the ranges in
    order. Within a copy TVM knows its range: a padded conversion's border rows apart from its
    interior, whose reads then carry no pad condition.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A block under the loop.
    loop : str
        The loop to cut, one of ``list_loops(func_or_sch, block)``.
    factors : sequence of int or None
        How many iterations each new loop runs, first range first.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the partition.

    Raises
    ------
    LoopError
        Fewer than two counts, a count that is not positive, two ``None``, a sum other than the
        extent, a loop that is parallel, vectorized or unrolled, an unknown block or loop.

    Examples
    --------
    Before loop_partition:

    >>> print(outline(double))
    for i in range(64):
      block B: B[i] = A[i] * 2.0

    After ``loop_partition(double, "B", "i", [1, 62, None])``:

    >>> print(outline(loop_partition(double, "B", "i", [1, 62, None])))
    block B_i_common
      block B_i0_partition
        for i0 in range(1):
          block B_i0: B[i0] = A[i0] * 2.0
      block B_i1_partition
        for i1 in range(1, 63):
          block B_i1: B[i1] = A[i1] * 2.0
      block B_i2_partition
        for i2 in range(63, 64):
          block B_i2: B[i2] = A[i2] * 2.0
    >>> loop_partition(double, "B", "i", [1, 64])
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: loop_partition(block='B', loop='i', factors=[1, 64]): loop_partition counts [1, 64] add up to 65 but loop 'i' has extent 64
    """
    return apply_step(func_or_sch, loop_step("loop_partition", block=block, loop=loop, factors=factors))


def reorder(func_or_sch: FuncOrSchedule, block: str, loops: Sequence[str]) -> s_tir.Schedule:
    """Put loops of a block in this order; requires each loop once, all in one single-branch chain.

    The loops take, outermost first, the places the same loops held; the loops not named stay
    where they are. TVM also refuses loops whose extent depends on an outer loop.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A block under the loops.
    loops : sequence of str
        Loops of ``list_loops(func_or_sch, block)``, in their new order (outermost first).

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the reorder.

    Raises
    ------
    LoopError
        A loop named twice, an unknown block or loop, or loops TVM refuses to reorder.

    Examples
    --------
    Before reorder:

    >>> print(outline(matmul))
    for i in range(16):
      for j in range(16):
        for k in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[k, j]

    After ``reorder(matmul, "C", ["k", "i"])``, ``k`` outermost and ``i`` where ``k`` was:

    >>> print(outline(reorder(matmul, "C", ["k", "i"])))
    for k in range(16):
      for j in range(16):
        for i in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[k, j]
    >>> reorder(matmul, "C", ["i", "i"])
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: reorder(block='C', loops=['i', 'i']): a loop is named twice in ['i', 'i']
    """
    return apply_step(func_or_sch, loop_step("reorder", block=block, loops=loops))


def fuse(func_or_sch: FuncOrSchedule, block: str, loops: Sequence[str]) -> s_tir.Schedule:
    """Fuse loops into one; requires 2 or more consecutive loops of a block, outermost first.

    The fused loop is named ``<loop>_<loop>_..._fused``; its extent is the product of theirs.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A block under the loops.
    loops : sequence of str
        Consecutive loops of ``list_loops(func_or_sch, block)``, outermost first.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the fuse.

    Raises
    ------
    LoopError
        Fewer than two loops, loops that are not consecutive or not outermost first, an unknown
        block or loop, or loops TVM refuses to fuse.

    Examples
    --------
    Before fuse:

    >>> print(outline(chain))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = Y[i, j] + 1.0

    After ``fuse(chain, "Z", ["i", "j"])``:

    >>> print(outline(fuse(chain, "Z", ["i", "j"])))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
    for i_j_fused in range(256):
      block Z: Z[i_j_fused // 16, i_j_fused % 16] = Y[i_j_fused // 16, i_j_fused % 16] + 1.0
    >>> fuse(matmul, "C", ["i", "k"])
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: fuse(block='C', loops=['i', 'k']): fuse needs 2 or more consecutive loops, outermost first; got ['i', 'k']
    """
    return apply_step(func_or_sch, loop_step("fuse", block=block, loops=loops))


def vectorize(func_or_sch: FuncOrSchedule, block: str, loop: str) -> s_tir.Schedule:
    """Run a loop's iterations as SIMD lanes; requires a spatial loop (not feeding a reduction).

    LLVM maps the lanes onto vector registers; 16 float32 lanes fill one AVX-512 register.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A block under the loop.
    loop : str
        A loop of ``list_loops(func_or_sch, block)``.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the vectorize.

    Raises
    ------
    LoopError
        A loop that feeds a reduction iterator of the block, an unknown block or loop, or a loop
        TVM refuses to vectorize.

    Examples
    --------
    Before vectorize, ``double`` split by 16:

    >>> sch = split(double, "B", "i", [None, 16])
    >>> print(outline(sch))
    for i_0 in range(4):
      for i_1 in range(16):
        block B: B[i_0 * 16 + i_1] = A[i_0 * 16 + i_1] * 2.0

    After ``vectorize(sch, "B", "i_1")``:

    >>> print(outline(vectorize(sch, "B", "i_1")))
    for i_0 in range(4):
      for i_1 in range(16):  # vectorized
        block B: B[i_0 * 16 + i_1] = A[i_0 * 16 + i_1] * 2.0
    >>> vectorize(matmul, "C", "k")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: vectorize(block='C', loop='k'): loop 'k' feeds a reduction iterator of block 'C': only spatial loops can be vectorized
    """
    return apply_step(func_or_sch, loop_step("vectorize", block=block, loop=loop))


def unroll(func_or_sch: FuncOrSchedule, block: str, loop: str) -> s_tir.Schedule:
    """Unroll a loop; requires a loop of the block (spatial or reduction).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A block under the loop.
    loop : str
        A loop of ``list_loops(func_or_sch, block)``.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the unroll.

    Raises
    ------
    LoopError
        An unknown block or loop, or a loop TVM refuses to unroll.

    Examples
    --------
    Before unroll:

    >>> print(outline(double))
    for i in range(64):
      block B: B[i] = A[i] * 2.0

    After ``unroll(double, "B", "i")``:

    >>> print(outline(unroll(double, "B", "i")))
    for i in range(64):  # unrolled
      block B: B[i] = A[i] * 2.0
    >>> unroll(double, "B", "j")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: unroll(block='B', loop='j'): block 'B' has no loop 'j'; its loops: i
    """
    return apply_step(func_or_sch, loop_step("unroll", block=block, loop=loop))


def parallel(func_or_sch: FuncOrSchedule, block: str, loop: str) -> s_tir.Schedule:
    """Run a loop's iterations on several cores; requires a spatial loop (not feeding a reduction).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A block under the loop.
    loop : str
        A loop of ``list_loops(func_or_sch, block)``.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the parallel.

    Raises
    ------
    LoopError
        A loop that feeds a reduction iterator of the block, an unknown block or loop, or a loop
        TVM refuses to parallelize.

    Examples
    --------
    Before parallel:

    >>> print(outline(matmul))
    for i in range(16):
      for j in range(16):
        for k in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[k, j]

    After ``parallel(matmul, "C", "i")``:

    >>> print(outline(parallel(matmul, "C", "i")))
    for i in range(16):  # parallel
      for j in range(16):
        for k in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[k, j]
    >>> parallel(matmul, "C", "k")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: parallel(block='C', loop='k'): loop 'k' feeds a reduction iterator of block 'C': only spatial loops can be parallel
    """
    return apply_step(func_or_sch, loop_step("parallel", block=block, loop=loop))


def cache_read(func_or_sch: FuncOrSchedule, block: str, read_index: int, scope: str = "global") -> s_tir.Schedule:
    """Read one input of a block through a copy; requires a read index of the block, a valid scope.

    A new block ``<buffer>_<scope>`` copies the buffer into a new one of that storage scope before
    its first reader; the block (and the buffer's other readers) then read the copy. Its loops
    are ``ax0, ax1, ...``; ``compute_at`` moves it under a loop, to copy one tile at a time.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        The block that reads the buffer.
    read_index : int
        The buffer's place among the block's reads (its ``T.reads``, as ``script`` shows them).
    scope : str, optional
        A storage scope: ``global`` (the default), ``shared``, ``local``, ...

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the cache_read.

    Raises
    ------
    LoopError
        A read index out of range, an unknown block, or a scope TVM does not know.

    Examples
    --------
    Before cache_read, ``C`` reads ``A`` (index 0) and ``B`` (index 1):

    >>> print(outline(matmul))
    for i in range(16):
      for j in range(16):
        for k in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[k, j]

    After ``cache_read(matmul, "C", 1)``, ``C`` reads ``B_global``:

    >>> print(outline(cache_read(matmul, "C", 1)))
    for ax0 in range(16):
      for ax1 in range(16):
        block B_global: B_global[ax0, ax1] = B[ax0, ax1]
    for i in range(16):
      for j in range(16):
        for k in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B_global[k, j]
    >>> cache_read(matmul, "C", 2)
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: cache_read(block='C', read_index=2, scope='global'): read_index 2 is out of range: block 'C' has 2 read buffer(s): A, B
    """
    return apply_step(func_or_sch, loop_step("cache_read", block=block, read_index=read_index, scope=scope))


def cache_write(func_or_sch: FuncOrSchedule, block: str, write_index: int, scope: str = "global") -> s_tir.Schedule:
    """Write one output of a block through a copy; requires a write index of the block, a valid scope.

    The block writes a new buffer of that storage scope, and a new block ``<buffer>_<scope>``
    copies it into the buffer; its loops are ``ax0, ax1, ...``. ``reverse_compute_at`` moves it
    under a loop, to write one tile at a time.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        The block that writes the buffer.
    write_index : int
        The buffer's place among the block's writes (its ``T.writes``).
    scope : str, optional
        A storage scope: ``global`` (the default), ``shared``, ``local``, ...

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the cache_write.

    Raises
    ------
    LoopError
        A write index out of range, an unknown block, or a scope TVM does not know.

    Examples
    --------
    Before cache_write:

    >>> print(outline(double))
    for i in range(64):
      block B: B[i] = A[i] * 2.0

    After ``cache_write(double, "B", 0)``, ``B`` writes ``B_global`` and ``B_global`` is copied
    into ``B`` (the block keeps its name, the copy is named after the buffer):

    >>> print(outline(cache_write(double, "B", 0)))
    for i in range(64):
      block B: B_global[i] = A[i] * 2.0
    for ax0 in range(64):
      block B_global: B[ax0] = B_global[ax0]
    >>> cache_write(double, "B", 1)
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: cache_write(block='B', write_index=1, scope='global'): write_index 1 is out of range: block 'B' has 1 written buffer(s): B
    """
    return apply_step(func_or_sch, loop_step("cache_write", block=block, write_index=write_index, scope=scope))


def compute_at(func_or_sch: FuncOrSchedule, block: str, target_block: str, loop: str) -> s_tir.Schedule:
    """Compute a producer under a loop of its consumer; requires a non-output block, its consumers under the loop.

    The block then computes, per iteration of the loop, the part of its output that the
    iteration reads; its new loops are ``ax0, ax1, ...``.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        The producer to move.
    target_block : str
        Another block, a consumer of ``block``.
    loop : str
        A loop of ``list_loops(func_or_sch, target_block)``.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the compute_at.

    Raises
    ------
    LoopError
        An output block, a consumer outside the loop, the same block twice, an unknown block or
        loop, or another refusal by TVM.

    Examples
    --------
    Before compute_at:

    >>> print(outline(chain))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = Y[i, j] + 1.0

    After ``compute_at(chain, "Y", "Z", "i")``, one row of ``Y`` per row of ``Z``:

    >>> print(outline(compute_at(chain, "Y", "Z", "i")))
    for i in range(16):
      for ax0 in range(16):
        block Y: Y[i, ax0] = X[i, ax0] * 2.0
      for j in range(16):
        block Z: Z[i, j] = Y[i, j] + 1.0
    >>> compute_at(chain, "Z", "Y", "i")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: compute_at(block='Z', target_block='Y', loop='i'): TVM refused: The block 'Z' is an output block
    """
    return apply_step(func_or_sch, loop_step("compute_at", block=block, target_block=target_block, loop=loop))


def reverse_compute_at(func_or_sch: FuncOrSchedule, block: str, target_block: str, loop: str) -> s_tir.Schedule:
    """Compute a consumer under a loop of its producer; requires a block whose producers are all under the loop.

    The block then computes, after each iteration of the loop, the part of its output that
    reads what the iteration wrote; its new loops are ``ax0, ax1, ...``.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        The consumer to move.
    target_block : str
        Another block, a producer of ``block``.
    loop : str
        A loop of ``list_loops(func_or_sch, target_block)``.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the reverse_compute_at.

    Raises
    ------
    LoopError
        A producer outside the loop, the same block twice, an unknown block or loop, or another
        refusal by TVM.

    Examples
    --------
    Before reverse_compute_at:

    >>> print(outline(chain))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = Y[i, j] + 1.0

    After ``reverse_compute_at(chain, "Z", "Y", "i")``, one row of ``Z`` per row of ``Y``:

    >>> print(outline(reverse_compute_at(chain, "Z", "Y", "i")))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
      for ax0 in range(16):
        block Z: Z[i, ax0] = Y[i, ax0] + 1.0
    >>> reverse_compute_at(chain, "Z", "Z", "i")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: reverse_compute_at(block='Z', target_block='Z', loop='i'): reverse_compute_at moves a block under a loop of another block; both are 'Z'
    """
    return apply_step(func_or_sch, loop_step("reverse_compute_at", block=block, target_block=target_block, loop=loop))


def compute_inline(func_or_sch: FuncOrSchedule, block: str) -> s_tir.Schedule:
    """Inline a producer into its consumers; requires an element-wise block (no init) that is not an output block.

    The block and its buffer disappear: its consumers compute its value where they read it.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        The producer to inline.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the compute_inline.

    Raises
    ------
    LoopError
        A reduction or an output block, an unknown block, or another refusal by TVM.

    Examples
    --------
    Before compute_inline:

    >>> print(outline(chain))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = Y[i, j] + 1.0

    After ``compute_inline(chain, "Y")``:

    >>> print(outline(compute_inline(chain, "Y")))
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = X[i, j] * 2.0 + 1.0
    >>> compute_inline(matmul, "C")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: compute_inline(block='C'): TVM refused: The block has init statement: block 'C'
    """
    return apply_step(func_or_sch, loop_step("compute_inline", block=block))


def reverse_compute_inline(func_or_sch: FuncOrSchedule, block: str) -> s_tir.Schedule:
    """Inline a consumer into its producer; requires an element-wise block (no init) reading one producer.

    The block must read one region of one buffer, written by a complete block (not a
    reduction) with no other consumer. The producer then stores the block's value into the
    block's output; the block and the producer's buffer disappear.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        The consumer to inline.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the reverse_compute_inline.

    Raises
    ------
    LoopError
        A reduction block, a block that reads several regions or an input of the kernel, a
        producer that is a reduction or has other consumers, an unknown block, or another
        refusal by TVM.

    Examples
    --------
    Before reverse_compute_inline:

    >>> print(outline(chain))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = Y[i, j] + 1.0

    After ``reverse_compute_inline(chain, "Z")``, block ``Y`` stores into ``Z``:

    >>> print(outline(reverse_compute_inline(chain, "Z")))
    for i in range(16):
      for j in range(16):
        block Y: Z[i, j] = X[i, j] * 2.0 + 1.0
    >>> reverse_compute_inline(matmul, "C")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: reverse_compute_inline(block='C'): TVM refused: The block has init statement: block 'C'
    """
    return apply_step(func_or_sch, loop_step("reverse_compute_inline", block=block))


def decompose_reduction(func_or_sch: FuncOrSchedule, block: str, loop: str) -> s_tir.Schedule:
    """Move a reduction's init above a loop; requires a reduction block and a loop outside its reduction loops.

    The init becomes a block ``<block>_init`` just before the loop, inside copies of the
    spatial loops it held (named ``<loop>_init``), and the block is renamed ``<block>_update``.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A reduction block.
    loop : str
        A loop of ``list_loops(func_or_sch, block)``.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the decompose_reduction.

    Raises
    ------
    LoopError
        A block without an init, a loop inside a reduction loop, an unknown block or loop, or
        another refusal by TVM.

    Examples
    --------
    Before decompose_reduction:

    >>> print(outline(matmul))
    for i in range(16):
      for j in range(16):
        for k in range(16):
          block C:
            init: C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[k, j]

    After ``decompose_reduction(matmul, "C", "j")``:

    >>> print(outline(decompose_reduction(matmul, "C", "j")))
    for i in range(16):
      for j_init in range(16):
        block C_init: C[i, j_init] = 0.0
      for j in range(16):
        for k in range(16):
          block C_update: C[i, j] = C[i, j] + A[i, k] * B[k, j]
    >>> decompose_reduction(chain, "Y", "i")
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: decompose_reduction(block='Y', loop='i'): TVM refused: The block 'Y' is not a reduction block - it violates condition #1. Definition of a reduction block: 1) The block has the `init` statement
    """
    return apply_step(func_or_sch, loop_step("decompose_reduction", block=block, loop=loop))


def transform_layout(func_or_sch: FuncOrSchedule, block: str, write_index: int, factors: Sequence[int],
                     perm: Sequence[int]) -> s_tir.Schedule:
    """Store a buffer the kernel allocates split and reordered; requires a buffer that is no argument, factors dividing its dims.

    The buffer the block writes (its ``write_index``-th) is stored with dim ``d`` split into
    ``(d // f, d % f)`` where its factor ``f`` is above 1, then with the dims in the order
    ``perm``, as a layout split and reorder do to a tensor; every access to it follows. It is for
    a register tile (a ``cache_write``'s ``local`` copy): a transposed conv's tile stored by
    stride phase is one box of the output, contiguous along the vector loop. A kernel's
    arguments keep their layout (that is a layout action).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    block : str
        A block that writes the buffer.
    write_index : int
        The buffer's place among the block's writes (its ``T.writes``).
    factors : list of int
        One per dim of the buffer: 1 keeps the dim, f > 1 splits it into (dim // f, dim % f).
    perm : list of int
        The dims after the splits, outermost first.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the transform_layout.

    Raises
    ------
    LoopError
        A buffer that is an argument of the kernel, factors that are not one per dim or do not
        divide it, a perm that is not a permutation of the dims after the splits.

    Examples
    --------
    ``Y`` is the buffer ``chain`` allocates between its two blocks:

    >>> print(outline(chain))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j] = X[i, j] * 2.0
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = Y[i, j] + 1.0

    After ``transform_layout(chain, "Y", 0, [1, 4], [0, 2, 1])``, ``Y`` is stored by ``j``'s
    residue mod 4 first:

    >>> print(outline(transform_layout(chain, "Y", 0, [1, 4], [0, 2, 1])))
    for i in range(16):
      for j in range(16):
        block Y: Y[i, j % 4, j // 4] = X[i, j] * 2.0
    for i in range(16):
      for j in range(16):
        block Z: Z[i, j] = Y[i, j % 4, j // 4] + 1.0
    >>> transform_layout(chain, "Z", 0, [1, 4], [0, 2, 1])
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: transform_layout(block='Z', write_index=0, factors=[1, 4], perm=[0, 2, 1]): Z is an argument of the kernel: its stored layout is a layout action (transform_layout changes buffers the kernel allocates, such as a cache_write's tile)
    """
    return apply_step(func_or_sch, loop_step("transform_layout", block=block, write_index=write_index,
                                             factors=list(factors), perm=list(perm)))
