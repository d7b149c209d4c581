"""The arguments a loop primitive's form starts from: the most useful blocks and loops of the
kernel for that primitive, checked by applying the primitive to the kernel's schedule (the
first candidate TVM accepts), so Apply never starts disabled when some choice would work.

A primitive's other arguments (split's factors, cache_read's index, transform_layout's factors
and perm) keep the defaults the form gives them; the candidates are tried with the same ones.
"""

from __future__ import annotations

from typing import Any, Iterator

from .errors import LoopError
from .loops import PRIMITIVES, FuncOrSchedule, LoopInfo, apply_step, block_writes, list_blocks, list_loops, loop_step

__all__ = ["default_arguments", "split_inner"]

#: candidates tried at most per primitive (each is one apply on a copy of the schedule, ~1-5 ms)
MAX_TRIES = 24


def default_arguments(func_or_sch: FuncOrSchedule, primitive: str) -> dict[str, Any] | None:
    """The block, loop(s) and target block that ``primitive`` starts from on this kernel:
    the first candidate (most useful first, see ``_candidates``) that applies; None when none
    of the first ``MAX_TRIES`` does (e.g. compute_at in a kernel of one block).

    >>> from tvm.script import tirx as T
    >>> @T.prim_func(s_tir=True)
    ... def two(a: T.Buffer((8, 16), "float32"), c: T.Buffer((8, 16), "float32")):
    ...     b = T.sblock_alloc_buffer((8, 16))
    ...     for i, j in T.grid(8, 16):
    ...         with T.sblock("B"):
    ...             vi, vj = T.axis.remap("SS", [i, j])
    ...             b[vi, vj] = a[vi, vj] * 2.0
    ...     for i, j in T.grid(8, 16):
    ...         with T.sblock("C"):
    ...             vi, vj = T.axis.remap("SS", [i, j])
    ...             c[vi, vj] = b[vi, vj] + 1.0
    >>> default_arguments(two, "compute_at")
    {'block': 'B', 'target_block': 'C', 'loop': 'i'}
    >>> default_arguments(two, "reorder"), default_arguments(two, "vectorize")
    ({'block': 'B', 'loops': ['j', 'i']}, {'block': 'B', 'loop': 'j'})
    """
    spec = PRIMITIVES[primitive]
    blocks = list_blocks(func_or_sch)
    loops = {b: list_loops(func_or_sch, b) for b in blocks}
    for n, args in enumerate(_candidates(primitive, blocks, loops)):
        if n >= MAX_TRIES:
            return None
        try:
            given = _form_defaults(func_or_sch, primitive, args, loops)
            apply_step(func_or_sch, loop_step(primitive, **{**spec.defaults, **given, **args}))
        except LoopError:
            continue
        return args
    return None


def split_inner(extent: int) -> int:
    """A split's default inner factor: the largest divisor of the loop's ``extent`` up to 16 (so
    ``[-1, split_inner(extent)]`` always applies).

    >>> split_inner(64), split_inner(112), split_inner(7), split_inner(1)
    (16, 16, 7, 1)
    """
    return max((f for f in range(1, 17) if extent % f == 0), default=1)


def _form_defaults(func_or_sch: FuncOrSchedule, primitive: str, args: dict[str, Any],
                   loops: dict[str, list[LoopInfo]]) -> dict[str, Any]:
    """The form's own defaults of the arguments this module does not choose (as ``_forms`` draws
    them): split's factors ``[-1, the largest divisor <= 16]``, index 0, one factor of 1 per dim
    and the identity perm for transform_layout (which keep the buffer's layout)."""
    spec = PRIMITIVES[primitive]
    out: dict[str, Any] = {}
    for arg, kind in spec.args.items():
        if kind == "ints" and "loop" in args:
            extent = next(lp.extent for lp in loops[args[spec.loop_of]] if lp.name == args["loop"])
            out[arg] = [None, split_inner(extent)]
        elif kind in ("int", "written"):
            out[arg] = int(spec.defaults.get(arg) or 0)
        elif kind in ("written_factors", "written_perm"):
            written = block_writes(func_or_sch, args[spec.loop_of])
            rank = len(written[0][1]) if written else 0
            out[arg] = [1] * rank if kind == "written_factors" else list(range(rank))
    return out


def _candidates(primitive: str, blocks: list[str], loops: dict[str, list[LoopInfo]]) -> Iterator[dict[str, Any]]:
    """Arguments worth trying, most useful first: spatial loops of extent > 1 before the rest;
    the innermost loop for vectorize and unroll, the outermost for parallel and split; the
    innermost pair swapped for reorder, the outermost pair for fuse; a producer under its next
    block's loops (outermost first) for compute_at, a consumer under the block before it for
    reverse_compute_at; element-wise blocks for the inlines."""
    kinds = PRIMITIVES[primitive].args
    if "target_block" in kinds:  # compute_at / reverse_compute_at: another block's loops
        step = 1 if primitive == "compute_at" else -1
        order = blocks if step == 1 else blocks[::-1]
        for i, block in enumerate(order):
            for target in order[i + 1:]:
                for lp in loops[target]:
                    yield {"block": block, "target_block": target, "loop": lp.name}
        return
    if "loops" in kinds:
        for block in blocks:
            names = [lp.name for lp in loops[block]]
            if len(names) >= 2:
                yield {"block": block, "loops": names[-1:-3:-1] if primitive == "reorder" else names[:2]}
        return
    if "loop" in kinds:
        for block in blocks:
            yield from ({"block": block, "loop": lp.name} for lp in _ranked(primitive, loops[block]))
        return
    ranked = blocks[::-1] if primitive == "reverse_compute_inline" else blocks
    yield from ({"block": b} for b in ranked)


def _ranked(primitive: str, loops: list[LoopInfo]) -> list[LoopInfo]:
    """A block's loops in the order worth trying ``primitive`` on them."""
    inner_first = primitive in ("vectorize", "unroll")
    order = loops[::-1] if inner_first else list(loops)
    spatial = primitive not in ("unroll", "decompose_reduction")
    return sorted(order, key=lambda lp: (lp.extent <= 1, spatial and lp.reduction))
