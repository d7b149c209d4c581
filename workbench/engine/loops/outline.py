"""A loop nest as a few lines of text (``outline``): each loop with its kind, each block with its
stores in loop variables; the names are the ones ``list_loops`` gives and primitives take.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from tvm import s_tir, tirx
from tvm.sym import Analyzer

from .apply import apply_steps
from .nest import FuncOrSchedule, LoopInfo, list_loops, walk_nest

__all__ = ["outline"]

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
    >>> from tvm import te
    >>> A, B = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    >>> k = te.reduce_axis((0, 16), "k")
    >>> C = te.compute((16, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    >>> matmul = te.create_prim_func([A, B, C])
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
