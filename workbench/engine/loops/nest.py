"""Reading a kernel's loop nest, from the IR (so that looking adds nothing to a schedule's trace).

Blocks are addressed by name (``list_blocks``), loops by ``(block, loop name)`` (``list_loops``),
the loop variable as TVMScript prints it: ``i0`` for an op's first dim, ``i0_0, i0_1`` after a
split, ``i0_i1_fused`` after a fuse, ``ax0, ax1`` for the loops TVM creates (cache_read,
cache_write, compute_at), ``j_init`` for a decomposed reduction's init. When an outer loop of the
same block already has a name, the inner one gets ``_1`` (then ``_2``...), as the printer does.
Blocks TVM creates are named by TVM (``A_global`` for cache_read of ``A``, ``C_init``/``C_update``
for decompose_reduction of ``C``). All names depend only on the steps, so replaying the same steps
gives the same names.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar, Union

import tvm
from tvm import s_tir, tirx

from ..base.errors import LoopError

__all__ = ["FuncOrSchedule", "LoopInfo", "block_nest", "block_nests", "block_writes", "diff", "list_blocks",
           "list_loops", "new_schedule", "prim_func", "printed_loop_names", "script", "visit_nodes", "walk_nest"]

FuncOrSchedule = Union[tirx.PrimFunc, tvm.IRModule, s_tir.Schedule]
C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class LoopInfo:
    """One loop around a block: its name, extent, kind (``serial``, ``parallel``, ``vectorized``,
    ``unrolled``, ``thread_binding``), depth (0 = outermost) and whether it feeds one of the
    block's reduction iterators; ``start``, its first value (0 but for a copy ``loop_partition``
    made past the first range; None where it is not a constant)."""

    block: str
    name: str
    extent: int
    kind: str
    depth: int
    reduction: bool = False
    start: int | None = 0


def prim_func(func_or_sch: FuncOrSchedule) -> tirx.PrimFunc:
    """The (scheduled) PrimFunc."""
    if isinstance(func_or_sch, s_tir.Schedule):
        return func_or_sch.mod["main"]
    if isinstance(func_or_sch, tvm.IRModule):
        funcs = [f for f in func_or_sch.functions.values() if isinstance(f, tirx.PrimFunc)]
        if "main" in [gv.name_hint for gv in func_or_sch.functions]:
            return func_or_sch["main"]
        if len(funcs) != 1:
            raise LoopError(f"a module to schedule needs a 'main' or a single PrimFunc; it has {len(funcs)}")
        return funcs[0]
    if not isinstance(func_or_sch, tirx.PrimFunc):
        raise LoopError(f"expected a PrimFunc, IRModule or Schedule, got {type(func_or_sch).__name__}")
    return func_or_sch


def new_schedule(func_or_sch: FuncOrSchedule) -> s_tir.Schedule:
    """A copy of the schedule, or a new schedule of the function (as ``main``)."""
    if isinstance(func_or_sch, s_tir.Schedule):
        return func_or_sch.copy()
    return s_tir.Schedule(tvm.IRModule({"main": prim_func(func_or_sch)}))


def walk_nest(func: tirx.PrimFunc, on_block: Callable[[s_tir.SBlockRealize, C], C],
              on_loop: Callable[[tirx.For, C], C], ctx: C) -> None:
    """The one walk over a kernel's blocks and loops, in program order (both branches of an
    ``if``). ``on_loop(loop, ctx)`` and ``on_block(realize, ctx)`` return the context their body
    is walked with; the root block is passed too (``realize.same_as(func.body)``)."""

    def walk(stmt: Any, ctx: C) -> None:
        if isinstance(stmt, s_tir.SBlockRealize):
            walk(stmt.block.body, on_block(stmt, ctx))
        elif isinstance(stmt, tirx.For):
            walk(stmt.body, on_loop(stmt, ctx))
        elif isinstance(stmt, tirx.SeqStmt):
            for child in stmt.seq:
                walk(child, ctx)
        elif isinstance(stmt, tirx.IfThenElse):
            walk(stmt.then_case, ctx)
            if stmt.else_case is not None:
                walk(stmt.else_case, ctx)
        elif isinstance(getattr(stmt, "body", None), tirx.Stmt):
            walk(stmt.body, ctx)

    walk(func.body, ctx)


_CHILDREN = ("seq", "body", "then_case", "else_case", "block", "init", "value", "a", "b", "args", "indices",
             "condition", "true_value", "false_value")


#: what ``visit_nodes`` descends into: expressions are ``tvm.ir`` nodes, statements (TVM 0.27's
#: ``tirx.Stmt``, a plain FFI object) are not
_NODES = (tvm.ir.base.Node, tirx.Stmt)


def visit_nodes(node: Any, visit: Callable[[Any], None]) -> None:
    """The TIR statements and expressions under ``node`` reached through the fields of
    ``_CHILDREN`` (bodies, sequences, values, indices, conditions; not a loop's bounds, a ramp's
    base or a block's predicate), depth-first, parents first (TVM 0.27's Python API has no
    ``post_order_visit`` for TIR); ``walk_nest`` is the structured walk."""
    visit(node)
    for name in _CHILDREN:
        child = getattr(node, name, None)
        if child is None or isinstance(child, (int, float, str)):
            continue
        if isinstance(child, Sequence):  # lists and TVM arrays
            for c in child:
                if isinstance(c, _NODES):
                    visit_nodes(c, visit)
        elif isinstance(child, _NODES):
            visit_nodes(child, visit)


def block_nests(func_or_sch: FuncOrSchedule) -> list[tuple[s_tir.SBlockRealize, list[tirx.For]]]:
    """Every block but the root, in program order, with the loops between it and its parent block.

    Read from the IR rather than through the schedule, so that looking adds nothing to the trace.
    """
    func = prim_func(func_or_sch)
    out: list[tuple[s_tir.SBlockRealize, list[tirx.For]]] = []

    def on_block(realize: s_tir.SBlockRealize, loops: list[tirx.For]) -> list[tirx.For]:
        if not realize.same_as(func.body):
            out.append((realize, loops))
        return []

    walk_nest(func, on_block, lambda loop, loops: loops + [loop], [])
    return out


def block_nest(func_or_sch: FuncOrSchedule, block: str) -> tuple[s_tir.SBlockRealize, list[tirx.For]]:
    """The block's realize and the loops between it and its parent block, outermost first;
    LoopError naming the blocks there are when there is no such block."""
    nests = block_nests(func_or_sch)
    found = next((nest for nest in nests if nest[0].block.name_hint == block), None)
    if found is None:
        raise LoopError(f"unknown block {block!r}; blocks: {', '.join(r.block.name_hint for r, _ in nests)}")
    return found


def list_blocks(func_or_sch: FuncOrSchedule) -> list[str]:
    """Names of the blocks, in program order, without the root block.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule

    Returns
    -------
    list of str
    """
    return [realize.block.name_hint for realize, _ in block_nests(func_or_sch)]


def printed_loop_names(raw: Sequence[str]) -> list[str]:
    """Loop names as the printer shows them: a name already used further out gets ``_1``, ``_2``...

    >>> printed_loop_names(["i", "j", "i", "i"])
    ['i', 'j', 'i_1', 'i_2']
    """
    out: list[str] = []
    for name in raw:
        new, n = name, 0
        while new in out:
            n += 1
            new = f"{name}_{n}"
        out.append(new)
    return out


def list_loops(func_or_sch: FuncOrSchedule, block: str) -> list[LoopInfo]:
    """The loops around ``block`` (up to its parent block), outermost first.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
    block : str
        A name from ``list_blocks``.

    Returns
    -------
    list of LoopInfo

    Raises
    ------
    LoopError
        When there is no such block, or a loop's extent is not a constant.
    """
    realize, loops = block_nest(func_or_sch, block)
    reduce_vars = [v for iv, e in zip(realize.block.iter_vars, realize.iter_values)
                   if iv.iter_type == tirx.IterVar.CommReduce for v in tirx.analysis.undefined_vars(e)]
    names = printed_loop_names([f.loop_var.name for f in loops])
    for name, f in zip(names, loops):
        if not isinstance(f.extent, tirx.IntImm):  # e.g. a compute_at under a tile that does not divide
            raise LoopError(f"loop {name!r} of block {block!r} runs {f.extent} times, a count that changes with "
                            "the loops around it: every loop needs a constant extent")
    return [LoopInfo(block, name, int(f.extent), tirx.ForKind(int(f.kind)).name.lower(), d,
                     any(f.loop_var.same_as(v) for v in reduce_vars), int(f.min) if isinstance(f.min, tirx.IntImm) else None)
            for d, (name, f) in enumerate(zip(names, loops))]


def block_writes(func_or_sch: FuncOrSchedule, block: str) -> list[tuple[str, tuple[int, ...]]]:
    """The buffers ``block`` writes, in ``write_index`` order (``cache_write``,
    ``transform_layout``), as (name, shape).

    >>> from tvm import te
    >>> A = te.placeholder((16, 16), name="A")
    >>> C = te.compute((16, 16), lambda i, j: A[i, j] + 1.0, name="C")
    >>> block_writes(te.create_prim_func([A, C]), "C")
    [('C', (16, 16))]
    """
    realize, _ = block_nest(func_or_sch, block)
    return [(str(w.source.name), tuple(int(n) for n in w.source.shape)) for w in realize.block.writes]


def script(func_or_sch: FuncOrSchedule) -> str:
    """The (scheduled) function as TVMScript.

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule

    Returns
    -------
    str
        ``func.script()`` of the function (of the schedule's ``main``).
    """
    return prim_func(func_or_sch).script()


def diff(before: str, after: str) -> str:
    """A unified diff of two scripts, for display.

    Parameters
    ----------
    before, after : str
        Scripts, e.g. from ``script``.

    Returns
    -------
    str
        The diff with ``--- before`` / ``+++ after`` headers; ``''`` when the scripts are equal.
    """
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), "before", "after"))
