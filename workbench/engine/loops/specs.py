"""The loop primitives' specs: each primitive named as TVM's ``tvm.s_tir.Schedule`` method, with
its arguments and their kinds (names and arguments are part of the session format), and
``loop_step``, a step of one of them with its defaults filled in.
"""

from __future__ import annotations

from typing import Any

from ..base.step import PrimitiveSpec, Step

__all__ = ["PRIMITIVES", "PrimitiveSpec", "loop_arg", "loop_step"]


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


def loop_arg(spec: PrimitiveSpec) -> str | None:
    """The argument that names the primitive's loop(s), if it takes any."""
    return next((k for k, kind in spec.args.items() if kind in ("loop", "loops")), None)
