"""The arguments a loop primitive's form starts from: the most useful blocks and loops of the
kernel for that primitive, checked by applying the primitive to the kernel's schedule (the
first candidate TVM accepts), so Apply never starts disabled when some choice would work.

A primitive's other arguments (split's factors, cache_read's index, transform_layout's factors
and perm) keep the defaults the form gives them; the candidates are tried with the same ones.
Forms offer a kernel's compute block first (``form_blocks``: a tuned conv's ``conv_update``, not
its ``conv_init``), and say what a split that does not divide its loop wastes (``split_waste``).
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Mapping, Sequence

from ..base.errors import LoopError
from ..base.step import Step
from .apply import apply_step
from .checks import free_and_given
from .nest import FuncOrSchedule, LoopInfo, block_nests, block_writes, list_blocks, list_loops
from .specs import PRIMITIVES, loop_step

__all__ = ["default_arguments", "default_step", "form_blocks", "split_inner", "split_waste"]

#: candidates tried at most per primitive: each is one apply on a copy of the schedule
MAX_TRIES = 24


def default_arguments(func_or_sch: FuncOrSchedule, primitive: str) -> dict[str, Any] | None:
    """The block, loop(s), target block (and read index) that ``primitive`` starts from on this
    kernel: the first candidate (most useful first, see ``_candidates``) that applies; None when none
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
    >>> print(default_step(two, "split"))
    split(block='B', loop='i', factors=[None, 8])
    """
    found = _first(func_or_sch, primitive)
    return found and found[0]


def default_step(func_or_sch: FuncOrSchedule, primitive: str, kernel: str = "") -> Step | None:
    """The whole step a form for ``primitive`` starts from (``default_arguments`` and the form's
    own defaults of the other arguments), for ``kernel``; None where ``default_arguments`` is."""
    found = _first(func_or_sch, primitive)
    return found and loop_step(primitive, kernel, **found[1])


def _first(func_or_sch: FuncOrSchedule, primitive: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The first candidate that applies: its arguments, and all the step's arguments."""
    spec = PRIMITIVES[primitive]
    loops = {b: list_loops(func_or_sch, b) for b in list_blocks(func_or_sch)}
    reads = {r.block.name_hint: len(r.block.reads) for r, _ in block_nests(func_or_sch)}
    for n, args in enumerate(_candidates(primitive, loops, reads)):
        if n >= MAX_TRIES:
            return None
        try:
            full = {**spec.defaults, **_form_defaults(func_or_sch, primitive, args, loops), **args}
            apply_step(func_or_sch, loop_step(primitive, **full))
        except LoopError:
            continue
        return args, full
    return None


def form_blocks(loops: Mapping[str, Sequence[LoopInfo]]) -> list[str]:
    """The blocks of ``loops`` (block -> its loops, in program order) in the order a form offers
    them: the compute blocks first (those with a reduction loop: a conv's, a matmul's), then the
    others in program order, a decomposed reduction's ``<name>_init`` last (it only zeroes the
    output; MetaSchedule decomposes every reduction it tunes).

    >>> from workbench.engine.loops.nest import LoopInfo
    >>> loop = lambda b, reduction=False: (LoopInfo(b, "i", 8, "serial", 0, reduction),)
    >>> form_blocks({"conv_init": loop("conv_init"), "conv_update": loop("conv_update", True), "relu": loop("relu")})
    ['conv_update', 'relu', 'conv_init']
    """
    def rank(block: str) -> int:
        return 0 if any(lp.reduction for lp in loops[block]) else 2 if block.endswith("_init") else 1

    return sorted(loops, key=rank)


def split_waste(factors: Sequence[int | None], extent: int) -> str | None:
    """What a split of a loop of ``extent`` wastes when its factors do not divide it (the inferred
    one rounded up: the iterations past ``extent`` only test a guard); None when nothing is
    wasted or the split is refused anyway.

    >>> split_waste([-1, 1000], 3136)
    '4000 iterations for 3136: 21.6% guarded'
    >>> split_waste([None, 16], 3136), split_waste([8, 500], 4000), split_waste([-1, 5000], 3136)
    (None, None, None)
    """
    free, given = free_and_given(factors)
    if len(free) != 1 or not given or min(given) <= 0 or (known := math.prod(given)) > extent:
        return None
    runs = -(-extent // known) * known
    return f"{runs} iterations for {extent}: {100 * (runs - extent) / runs:.1f}% guarded" if runs > extent else None


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


def _candidates(primitive: str, loops: dict[str, list[LoopInfo]],
                reads: Mapping[str, int]) -> Iterator[dict[str, Any]]:
    """Arguments worth trying, most useful first: the blocks in ``form_blocks`` order (in program
    order for the primitives that move or inline a block); spatial loops of extent > 1 before the
    rest; the innermost loop for vectorize and unroll, the outermost for parallel and split; the
    innermost pair swapped for reorder, the outermost pair for fuse; a producer under its next
    block's loops (outermost first) for compute_at, a consumer under the block before it for
    reverse_compute_at; element-wise blocks for the inlines; each buffer a block reads for
    cache_read (a tuned reduction reads its own output first)."""
    kinds, blocks = PRIMITIVES[primitive].args, form_blocks(loops)
    if "target_block" in kinds:  # compute_at / reverse_compute_at: another block's loops
        step = 1 if primitive == "compute_at" else -1
        order = list(loops)[::step]
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
    if primitive == "cache_read":
        yield from ({"block": b, "read_index": i} for b in blocks for i in range(reads[b]))
        return
    inline = {"compute_inline": 1, "reverse_compute_inline": -1}.get(primitive)  # producers first, consumers last
    yield from ({"block": b} for b in (list(loops)[::inline] if inline else blocks))


def _ranked(primitive: str, loops: list[LoopInfo]) -> list[LoopInfo]:
    """A block's loops in the order worth trying ``primitive`` on them."""
    inner_first = primitive in ("vectorize", "unroll")
    order = loops[::-1] if inner_first else list(loops)
    spatial = primitive not in ("unroll", "decompose_reduction")
    return sorted(order, key=lambda lp: (lp.extent <= 1, spatial and lp.reduction))
