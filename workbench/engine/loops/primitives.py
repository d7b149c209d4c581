"""Loop primitives on a kernel's PrimFunc, through ``tvm.s_tir.Schedule``, as replayable steps.

A step is a ``Step`` of kind ``loop`` (``loop_step``): a primitive named as TVM names it
(``split``, ``fuse``, ...) with its arguments. Blocks are addressed by name (``list_blocks``),
loops by ``(block, loop name)`` (``list_loops``), the loop variable as TVMScript prints it:
``i0`` for an op's first dim, ``i0_0, i0_1`` after a split, ``i0_i1_fused`` after a fuse,
``ax0, ax1`` for the loops TVM creates (cache_read/cache_write, compute_at), ``j_init`` for a
decomposed reduction's init. When an outer loop of the same block already has a name, the inner
one gets ``_1`` (then ``_2``...), as the printer does. Blocks TVM creates are named by TVM
(``A_global`` for cache_read of ``A``, ``C_init``/``C_update`` for decompose_reduction of ``C``).
All names depend only on the steps, so replaying the same steps gives the same names.

Every primitive works on a copy; bad arguments and TVM's refusals raise ``LoopError`` naming
the primitive, its arguments and the reason.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar, Union

import tvm
from tvm import s_tir, tirx

from ..base.errors import LoopError
from ..base.step import PrimitiveSpec, Step

__all__ = ["visit_nodes", "loop_step", "LoopInfo", "PrimitiveSpec", "PRIMITIVES", "FuncOrSchedule", "list_blocks", "list_loops",
           "block_nest", "block_nests", "printed_loop_names", "free_and_given", "block_writes", "apply_step", "apply_steps", "script", "diff", "trace_json", "apply_trace_json", "empty_schedule", "walk_nest",
           "basic_schedule"]

FuncOrSchedule = Union[tirx.PrimFunc, tvm.IRModule, s_tir.Schedule]
C = TypeVar("C")


########## Steps and primitive specs ##########

def _spec(kinds: str, doc: str, tvm_args: str, **extra: Any) -> PrimitiveSpec:
    return PrimitiveSpec.parse(kinds, doc, tvm_args=tuple(tvm_args.split()), **extra)


_LOOP = "block:block loop:loop"
#: primitive name -> spec; the names and arguments are TVM's (and part of the session format)
PRIMITIVES: dict[str, PrimitiveSpec] = {
    "split": _spec(_LOOP + " factors:ints", "split a loop into nested loops, outermost first (one factor may be "
                   "null: inferred)", "loop factors"),
    "loop_partition": _spec(_LOOP + " factors:ints", "cut a loop into consecutive loops over consecutive ranges, "
                            "each with its own copy of the body (blocks <block>_<loop><k>), e.g. a padded border "
                            "apart from the interior (one count may be null: the rest)", "loop factors"),
    "reorder": _spec("block:block loops:loops", "put these loops of a block in this order (outermost first)", "*loops"),
    "fuse": _spec("block:block loops:loops", "fuse consecutive loops into one", "*loops"),
    "vectorize": _spec(_LOOP, "run a spatial loop as SIMD lanes", "loop"),
    "unroll": _spec(_LOOP, "unroll a loop", "loop"),
    "parallel": _spec(_LOOP, "run a spatial loop's iterations on several cores", "loop"),
    "cache_read": _spec("block:block read_index:int scope:str", "read a block's input through a copy (block "
                        "<buffer>_<scope>)", "block read_index scope", defaults={"scope": "global"}),
    "cache_write": _spec("block:block write_index:written scope:str", "write a block's output through a copy (block "
                         "<buffer>_<scope>)", "block write_index scope", defaults={"scope": "global"}),
    "compute_at": _spec("block:block target_block:block loop:loop", "compute a producer under a loop of its consumer",
                        "block loop", loop_of="target_block"),
    "reverse_compute_at": _spec("block:block target_block:block loop:loop", "compute a consumer under a loop of "
                                "its producer", "block loop", loop_of="target_block"),
    "compute_inline": _spec("block:block", "inline an element-wise producer into its consumers", "block"),
    "reverse_compute_inline": _spec("block:block", "inline an element-wise consumer into its producer", "block"),
    "decompose_reduction": _spec(_LOOP, "move a reduction's init above a loop (block <name>_init; the block "
                                 "becomes <name>_update)", "block loop"),
    "transform_layout": _spec("block:block write_index:written factors:written_factors perm:written_perm", "store a buffer the kernel "
                              "allocates (a cache_write's tile) with each dim split by its factor (dim // f, dim % f; "
                              "1: kept) and the dims then in order perm", "block write_index factors perm"),
}


def loop_step(primitive: str, kernel: str = "", **args: Any) -> Step:
    """A loop step with its defaults filled in and its arguments in the spec's order.

    >>> step = loop_step("split", "C", loop="i", block="C", factors=[None, 16])
    >>> step
    Step(kind='loop', target='C', primitive='split', args=(('block', 'C'), ('loop', 'i'), ('factors', (None, 16))))
    >>> print(step)
    split(block='C', loop='i', factors=[None, 16])
    >>> step.to_json()
    {'kind': 'loop', 'op': 'C', 'primitive': 'split', 'args': {'block': 'C', 'loop': 'i', 'factors': [None, 16]}}
    """
    spec = PRIMITIVES.get(primitive)
    if spec is not None:
        args = {**spec.defaults, **args}
        args = {**{k: args[k] for k in spec.args if k in args}, **args}
    return Step.make("loop", kernel, primitive, **args)


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


########## Reading a schedule ##########

def _func(func_or_sch: FuncOrSchedule) -> tirx.PrimFunc:
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


def _schedule(func_or_sch: FuncOrSchedule) -> s_tir.Schedule:
    """A copy of the schedule, or a new schedule of the function (as ``main``)."""
    if isinstance(func_or_sch, s_tir.Schedule):
        return func_or_sch.copy()
    return s_tir.Schedule(tvm.IRModule({"main": _func(func_or_sch)}))


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
    func = _func(func_or_sch)
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

    >>> from workbench.engine.schedules.tiling.steps import _example
    >>> block_writes(_example()[0], "C")
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
    return _func(func_or_sch).script()


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


########## Applying steps ##########

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _all_ints(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(_is_int(x) for x in v)


#: argument kind -> (test, what a value must be)
_KINDS: dict[str, tuple[Any, str]] = {
    "block": (lambda v: isinstance(v, str), "a block name"),
    "loop": (lambda v: isinstance(v, str), "a loop name"),
    "loops": (lambda v: isinstance(v, list) and v and all(isinstance(x, str) for x in v), "a list of loop names"),
    "int": (_is_int, "an integer"),
    "ints": (lambda v: isinstance(v, list) and v and all(x is None or _is_int(x) for x in v),
             "a list of integers (or null)"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "written": (_is_int, "an integer, the index of a buffer the block writes"),
    "written_factors": (_all_ints, "a list of integers, one per dim of the written buffer"),
    "written_perm": (_all_ints, "a list of integers, the written buffer's dims after the splits in their new order"),
}


def _validate(sch: s_tir.Schedule, step: Step) -> tuple[dict[str, Any], list[LoopInfo]]:
    """The step's arguments (defaults filled in) and the loops they name, all checked; else LoopError."""
    p = step.primitive
    spec = PRIMITIVES.get(p)
    if spec is None:
        raise LoopError(f"unknown loop primitive {p!r}; known: {', '.join(PRIMITIVES)}")
    a = {**spec.defaults, **step.kwargs}
    if missing := [k for k in spec.args if k not in a]:
        raise LoopError(f"missing argument(s) {', '.join(missing)}; {p} takes {', '.join(spec.args)}")
    if extra := [k for k in a if k not in spec.args]:
        raise LoopError(f"unexpected argument(s) {', '.join(extra)}; {p} takes {', '.join(spec.args)}")
    for k, kind in spec.args.items():
        test, want = _KINDS[kind]
        if not test(a[k]):
            raise LoopError(f"{k} must be {want}, got {a[k]!r}")
    blocks = {r.block.name_hint: r.block for r, _ in block_nests(sch)}
    if unknown := [a[k] for k, kind in spec.args.items() if kind == "block" and a[k] not in blocks]:
        raise LoopError(f"unknown block {unknown[0]!r}; blocks: {', '.join(blocks)}")
    loops: list[LoopInfo] = []
    if key := _loop_arg(spec):
        owner, wanted = a[spec.loop_of], a[key] if spec.args[key] == "loops" else [a[key]]
        infos = {info.name: info for info in list_loops(sch, owner)}
        if unknown := [n for n in wanted if n not in infos]:
            raise LoopError(f"block {owner!r} has no loop {unknown[0]!r}; its loops: {', '.join(infos) or 'none'}")
        if len(set(wanted)) != len(wanted):
            raise LoopError(f"a loop is named twice in {wanted}")
        loops = [infos[n] for n in wanted]
    _check(p, a, loops, blocks[a["block"]], sch.mod["main"])
    if p in ("split", "loop_partition"):  # -1 infers a factor as in layout splits; TVM's word for it is None
        a["factors"] = [None if f == -1 else f for f in a["factors"]]
    if p == "loop_partition" and None not in a["factors"]:  # TVM takes the last count as the rest only
        a["factors"] = [*a["factors"][:-1], None]
    return a, loops


def _loop_arg(spec: PrimitiveSpec) -> str | None:
    return next((k for k, kind in spec.args.items() if kind in ("loop", "loops")), None)


def _check(p: str, a: dict[str, Any], loops: list[LoopInfo], block: Any, main: tirx.PrimFunc) -> None:
    """The cheap preconditions, checked before TVM is asked (``main``: the kernel)."""
    if p == "split":
        fs = a["factors"]
        free, given = free_and_given(fs)
        known = math.prod(given)
        ext, name = loops[0].extent, loops[0].name
        if len(fs) < 2 or len(free) > 1:
            raise LoopError(f"split needs 2 or more factors, at most one of them null; got {fs}")
        if any(f <= 0 for f in given):
            raise LoopError(f"split factors must be positive (or one null), got {fs}")
        if not free and known != ext:
            raise LoopError(f"split factors {fs} multiply to {known} but loop {name!r} has extent {ext}")
        if free and known > ext:
            raise LoopError(f"split factors {fs} multiply to {known}, more than loop {name!r}'s extent {ext}")
    elif p == "loop_partition":
        fs, ext, name = a["factors"], loops[0].extent, loops[0].name
        free, given = free_and_given(fs)
        known = sum(given)
        if len(fs) < 2 or len(free) > 1 or any(f <= 0 for f in given):
            raise LoopError(f"loop_partition needs 2 or more positive counts, at most one of them null; got {fs}")
        if known > ext or (not free and known != ext) or (free and known == ext):
            raise LoopError(f"loop_partition counts {fs} add up to {known} but loop {name!r} has extent {ext}"
                            + (" (the null count would be empty)" if free and known == ext else ""))
        if loops[0].kind != "serial":
            raise LoopError(f"loop {name!r} is {loops[0].kind}: only a serial loop can be partitioned (partition "
                            "before parallel, vectorize or unroll)")
        if loops[0].start != 0:  # TVM 0.27 cuts it as if it started at 0 and drops its last iterations
            at = "a value that varies" if loops[0].start is None else loops[0].start
            raise LoopError(f"loop {name!r} starts at {at}: only a loop that starts at 0 can be partitioned (a "
                            "range cut off by an earlier loop_partition: give that partition more counts)")
    elif p == "fuse" and (len(loops) < 2 or any(y.depth != x.depth + 1 for x, y in zip(loops, loops[1:]))):
        raise LoopError(f"fuse needs 2 or more consecutive loops, outermost first; got {a['loops']}")
    elif p in ("vectorize", "parallel") and loops[0].reduction:
        raise LoopError(f"loop {loops[0].name!r} feeds a reduction iterator of block {a['block']!r}: only spatial "
                        f"loops can be {'vectorized' if p == 'vectorize' else 'parallel'}")
    elif p in ("compute_at", "reverse_compute_at") and a["block"] == a["target_block"]:
        raise LoopError(f"{p} moves a block under a loop of another block; both are {a['block']!r}")
    elif p == "transform_layout":
        _check_transform(a, block, main)
    elif p in ("cache_read", "cache_write"):
        key, have = ("read_index", block.reads) if p == "cache_read" else ("write_index", block.writes)
        if not 0 <= a[key] < len(have):
            raise LoopError(f"{key} {a[key]} is out of range: block {a['block']!r} has {len(have)} "
                            f"{'read' if p == 'cache_read' else 'written'} buffer(s): "
                            f"{', '.join(str(r.source.name) for r in have)}")


def free_and_given(factors: Sequence[int | None]) -> tuple[list, list[int]]:
    """A split's or partition's inferred entries (None or -1) and the given ones."""
    return [f for f in factors if f is None or f == -1], [f for f in factors if f is not None and f != -1]


def _check_transform(a: dict[str, Any], block: Any, main: tirx.PrimFunc) -> None:
    if not 0 <= a["write_index"] < len(block.writes):
        raise LoopError(f"write_index {a['write_index']} is out of range: block {a['block']!r} has "
                        f"{len(block.writes)} written buffer(s)")
    buf = block.writes[a["write_index"]].source
    name, shape = str(buf.name), [int(n) for n in buf.shape]
    if name in {str(v.name) for v in main.params}:
        raise LoopError(f"{name} is an argument of the kernel: its stored layout is a layout action (transform_layout "
                        "changes buffers the kernel allocates, such as a cache_write's tile)")
    fs = a["factors"]
    if len(fs) != len(shape) or any(f is None or f < 1 for f in fs):
        raise LoopError(f"factors needs one positive integer per dim of {name} (shape {shape}; 1 keeps a dim), got {fs}")
    if bad := [(d, f, n) for d, (f, n) in enumerate(zip(fs, shape)) if n % f]:
        d, f, n = bad[0]
        raise LoopError(f"factor {f} does not divide dim {d} of {name} (extent {n})")
    rank = len(shape) + sum(f > 1 for f in fs)
    if sorted(a["perm"]) != list(range(rank)):
        raise LoopError(f"perm must order all {rank} dims after the splits (0..{rank - 1}), got {a['perm']}")


def _index_map(factors: Sequence[int], perm: Sequence[int]) -> Callable[..., tuple]:
    """transform_layout's index map: each dim split by its factor (outer, inner), then permuted."""
    def index_map(*idx: Any) -> tuple:
        dims = [part for i, f in zip(idx, factors) for part in ((i // f, i % f) if f > 1 else (i,))]
        return tuple(dims[p] for p in perm)
    return index_map


_RV = re.compile(r"(?:(?:[Bb]lock|[Ll]oop) )?(s_tir\.(SBlock|For)#\d+)")
_RV_LINE = re.compile(r"# (s_tir\.(?:SBlock|For)#\d+)\s*\n\s*(?:with T\.sblock\(\"([^\"]+)\"|for (\w+))")


def _reason(err: Exception) -> str:
    """TVM's reason in a line or three: the rendered IR and backtrace dropped, ``s_tir.SBlock#0``
    replaced by the block's name."""
    text = str(err)
    ir, sep, msg = text.partition("Error message:")
    refs = {m[1]: f"block {m[2]!r}" if m[2] else f"loop {m[3]!r}" for m in _RV_LINE.finditer(ir)}
    lines = [ln.strip() for ln in (msg if sep else text).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("File ", "Traceback", "Stack trace", "at ", "^"))]
    lines = [re.sub(r"^(\w+\.)*\w*Error: ", "", ln) for ln in lines[:3]]
    out = _RV.sub(lambda m: refs.get(m[1], "a " + ("block" if m[2] == "SBlock" else "loop")), " ".join(lines))
    return (out[:400] + "...") if len(out) > 400 else out or type(err).__name__


def _apply(sch: s_tir.Schedule, step: Step) -> None:
    """Apply ``step`` to ``sch`` in place."""
    if not isinstance(step, Step) or step.kind != "loop":
        raise LoopError(f"expected a loop Step, got {step!r}")
    try:
        a, loops = _validate(sch, step)
    except LoopError as e:
        raise LoopError(f"{step}: {e}") from None
    spec = PRIMITIVES[step.primitive]
    try:
        # the handles: their GetSBlock / GetLoops enter the trace, as in MetaSchedule's traces
        h = {k: sch.get_sblock(a[k]) if kind == "block" else a[k] for k, kind in spec.args.items()}
        if key := _loop_arg(spec):
            rvs = sch.get_loops(h[spec.loop_of])
            h[key] = [rvs[lp.depth] for lp in loops] if spec.args[key] == "loops" else rvs[loops[0].depth]
        if step.primitive == "transform_layout":  # TVM takes the buffer as ("write", i) and an index map
            sch.transform_layout(h["block"], ("write", a["write_index"]), _index_map(a["factors"], a["perm"]))
        else:
            getattr(sch, step.primitive)(*[x for k in spec.tvm_args for x in (h[k[1:]] if k[0] == "*" else [h[k]])])
    except Exception as e:  # noqa: BLE001 - ScheduleError, TVMError, InternalError, ValueError from the FFI...
        raise LoopError(f"{step}: TVM refused: {_reason(e)}") from None


def apply_step(func_or_sch: FuncOrSchedule, step: Step) -> s_tir.Schedule:
    """Apply one loop primitive to a copy of the schedule (or to a new schedule of a function).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    step : Step
        A loop step (``loop_step``): a primitive of ``PRIMITIVES`` with its arguments.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the step.

    Raises
    ------
    LoopError
        An unknown primitive, block or loop, arguments of the wrong type or value, or a refusal
        by TVM; the message names the step and the reason.

    Examples
    --------
    ``split`` requires a loop of the block; factors, outermost first, that multiply to the
    loop's extent, or with one null factor, inferred. Before split, in TensorIR:

    >>> from tvm import te
    >>> A = te.placeholder((64,), name="A")
    >>> B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    >>> func = te.create_prim_func([A, B])
    >>> print(script(func))
    # from tvm.script import tirx as T
    # from tvm.tirx.layout import Axis
    <BLANKLINE>
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        for i in range(64):
            with T.sblock("B"):
                v_i = T.axis.spatial(64, i)
                T.reads(A[v_i])
                T.writes(B[v_i])
                B[v_i] = A[v_i] * T.float32(2.0)

    After applying split, the IR becomes:

    >>> sch = apply_step(func, loop_step("split", block="B", loop="i", factors=[None, 16]))
    >>> print(script(sch))
    # from tvm.script import tirx as T
    # from tvm.tirx.layout import Axis
    <BLANKLINE>
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        for i_0, i_1 in T.grid(4, 16):
            with T.sblock("B"):
                v_i = T.axis.spatial(64, i_0 * 16 + i_1)
                T.reads(A[v_i])
                T.writes(B[v_i])
                B[v_i] = A[v_i] * T.float32(2.0)
    >>> [(loop.name, loop.extent) for loop in list_loops(sch, "B")]
    [('i_0', 4), ('i_1', 16)]
    >>> apply_step(func, loop_step("split", block="B", loop="i", factors=[3, 16]))
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: split(block='B', loop='i', factors=[3, 16]): split factors [3, 16] multiply to 48 but loop 'i' has extent 64
    """
    sch = _schedule(func_or_sch)
    _apply(sch, step)
    return sch


def apply_steps(func_or_sch: FuncOrSchedule, steps: Sequence[Step]) -> s_tir.Schedule:
    """Apply steps in order to a new schedule of ``func_or_sch`` (left unchanged).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
    steps : sequence of Step

    Returns
    -------
    tvm.s_tir.Schedule

    Raises
    ------
    LoopError
        As ``apply_step``, the message starting with the failing step's index: ``step 2: ...``.
    """
    sch = _schedule(func_or_sch)
    for i, step in enumerate(steps):
        try:
            _apply(sch, step)
        except LoopError as e:
            raise LoopError(f"step {i}: {e}", reason=e.reason) from None
    return sch


########## Traces (what MetaSchedule records hold) ##########

def _plain(obj: Any) -> Any:
    """TVM scalars and containers as plain Python, so the trace can go into a JSON file."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (tirx.IntImm, tirx.FloatImm)):
        return obj.value
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, Iterable):
        return [_plain(x) for x in obj]
    return str(obj)


def trace_json(sch: s_tir.Schedule) -> Any:
    """The schedule's trace as JSON data.

    Parameters
    ----------
    sch : tvm.s_tir.Schedule

    Returns
    -------
    list
        ``sch.trace.as_json()`` with TVM's integers, strings and arrays as plain Python, so
        ``json.dumps`` takes it; ``apply_trace_json`` replays it.
    """
    return _plain(sch.trace.as_json())


def apply_trace_json(func_or_sch: FuncOrSchedule, trace: Any) -> s_tir.Schedule:
    """Rebuild a schedule of ``func_or_sch`` from a saved trace (ours or a MetaSchedule record's).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    trace : list
        From ``trace_json``, ``Trace.as_json()`` or a tuning record.

    Returns
    -------
    tvm.s_tir.Schedule

    Raises
    ------
    LoopError
        When the trace does not apply to this function.
    """
    sch = _schedule(func_or_sch)
    try:
        s_tir.schedule.Trace.apply_json_to_schedule(trace, sch)
    except Exception as e:  # noqa: BLE001
        raise LoopError(f"the saved trace does not apply to this kernel: {_reason(e)}") from None
    return sch


########## A starting schedule ##########

def basic_schedule(func: FuncOrSchedule, head: str | None = None, kernel: str = "") -> list[Step]:
    """A sensible first schedule, as steps a user can edit.

    The head block (default: the first) gets its reductions moved outside its innermost
    spatial loop, which is vectorized (split by 16 when longer than 64), and its outermost
    non-unit spatial loop parallel; the blocks after it are inlined into it, or computed
    under that parallel loop. Steps TVM refuses are left out.

    Parameters
    ----------
    func : PrimFunc, IRModule or Schedule
    head : str, optional
        The block to schedule first.
    kernel : str, optional
        The kernel the steps are for (their target).

    Returns
    -------
    list of Step
        Steps that ``apply_steps`` applies without error.
    """
    sch = _schedule(func)
    blocks = list_blocks(sch)
    head = head or blocks[0]
    steps: list[Step] = []

    def attempt(primitive: str, **args: Any) -> bool:
        nonlocal sch
        step = loop_step(primitive, kernel, **args)
        try:
            sch = apply_step(sch, step)
        except LoopError:
            return False
        steps.append(step)
        return True

    loops = list_loops(sch, head)
    spatial = [lp for lp in loops if not lp.reduction]
    reduce = [lp.name for lp in loops if lp.reduction]
    if spatial:
        outer_names, inner = [lp.name for lp in spatial[:-1]], spatial[-1].name
        if spatial[-1].extent > 64 and spatial[-1].extent % 16 == 0 \
                and attempt("split", block=head, loop=inner, factors=[None, 16]):
            outer_names, inner = outer_names + [f"{inner}_0"], f"{inner}_1"
        if reduce:
            attempt("reorder", block=head, loops=outer_names + reduce + [inner])
        attempt("vectorize", block=head, loop=inner)
    outer = next((lp.name for lp in list_loops(sch, head) if lp.extent > 1 and not lp.reduction), None)
    if outer:
        attempt("parallel", block=head, loop=outer)
    for b in reversed(blocks[blocks.index(head) + 1:]):
        if not attempt("reverse_compute_inline", block=b) and outer:
            attempt("reverse_compute_at", block=b, target_block=head, loop=outer)
    return steps


def empty_schedule(func_or_sch: FuncOrSchedule) -> s_tir.Schedule:
    """A schedule that changes nothing, its trace one block lookup (MetaSchedule's
    ``query_schedule`` skips records whose trace has no instruction at all)."""
    sch = _schedule(func_or_sch)
    sch.get_sblock(list_blocks(sch)[0])
    return sch
