"""Checking a loop step before TVM is asked: its arguments' kinds, the blocks and loops they name,
and each primitive's cheap preconditions, each refusal a ``LoopError`` saying why.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from tvm import s_tir, tirx

from ..base.errors import LoopError
from ..base.step import Step
from .nest import LoopInfo, block_nests, list_loops
from .specs import PRIMITIVES, loop_arg

__all__ = ["free_and_given", "validate"]


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


def validate(sch: s_tir.Schedule, step: Step) -> tuple[dict[str, Any], list[LoopInfo]]:
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
    if key := loop_arg(spec):
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
