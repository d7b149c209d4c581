"""Refused loop steps: each documented precondition, ours or TVM's, refused with a LoopError that
names the step and the reason in a line or three, the input unchanged."""

from __future__ import annotations

import pytest

from tests.engine.loops.kernels import KERNELS
from workbench.engine.base.errors import LoopError
from workbench.engine.loops.apply import apply_step
from workbench.engine.loops.nest import list_loops, script
from workbench.engine.loops.specs import loop_step

S = loop_step


FAILURES = {  # id: (kernel, bad step, message fragment)
    "unknown_primitive": ("mm", S("bind", block="C", loop="i"), "unknown loop primitive 'bind'"),
    "unknown_block": ("mm", S("parallel", block="D", loop="i"), "unknown block 'D'; blocks: C"),
    "unknown_loop": ("mm", S("parallel", block="C", loop="x"), "block 'C' has no loop 'x'; its loops: i, j, k"),
    "unknown_loop_in_list": ("mm", S("reorder", block="C", loops=["k", "q"]), "has no loop 'q'"),
    "missing_argument": ("mm", S("split", block="C", loop="i"), "missing argument(s) factors"),
    "unexpected_argument": ("mm", S("unroll", block="C", loop="i", factor=4), "unexpected argument(s) factor"),
    "block_not_a_string": ("mm", S("compute_inline", block=3), "block must be a block name, got 3"),
    "factors_not_ints": ("mm", S("split", block="C", loop="i", factors=[2.5, None]), "factors must be"),
    "factors_product": ("mm", S("split", block="C", loop="i", factors=[3, 16]),
                        "split factors [3, 16] multiply to 48 but loop 'i' has extent 64"),
    "factors_too_big": ("mm", S("split", block="C", loop="i", factors=[128, None]), "more than loop 'i'"),
    "factor_not_positive": ("mm", S("split", block="C", loop="i", factors=[-2, -32]), "must be positive"),
    "two_null_factors": ("mm", S("split", block="C", loop="i", factors=[None, None]), "at most one of them null"),
    "one_factor": ("mm", S("split", block="C", loop="i", factors=[64]), "2 or more factors"),
    "fuse_not_consecutive": ("mm", S("fuse", block="C", loops=["i", "k"]), "consecutive loops"),
    "fuse_inner_first": ("mm", S("fuse", block="C", loops=["j", "i"]), "outermost first"),
    "fuse_one_loop": ("mm", S("fuse", block="C", loops=["j"]), "2 or more consecutive loops"),
    "fuse_empty": ("mm", S("fuse", block="C", loops=[]), "loops must be a list of loop names, got []"),
    "reorder_twice": ("mm", S("reorder", block="C", loops=["i", "i"]), "named twice"),
    "vectorize_reduction": ("mm", S("vectorize", block="C", loop="k"),
                            "loop 'k' feeds a reduction iterator of block 'C': only spatial loops can be vectorized"),
    "parallel_reduction": ("mm", S("parallel", block="C", loop="k"), "only spatial loops can be parallel"),
    "read_index_range": ("mm", S("cache_read", block="C", read_index=2), "read_index 2 is out of range"),
    "write_index_type": ("mm", S("cache_write", block="C", write_index="0"), "write_index must be an integer"),
    "bad_scope": ("mm", S("cache_write", block="C", write_index=0, scope="nope"),
                  'TVM refused: The input storage scope "nope" is invalid'),
    "compute_at_itself": ("chain", S("compute_at", block="Y", target_block="Y", loop="i"), "both are 'Y'"),
    "compute_at_output_block": ("chain", S("compute_at", block="Z", target_block="Y", loop="i"),
                                "TVM refused: The block 'Z' is an output block"),
    "compute_at_consumer_outside": ("chain4", S("compute_at", block="Y", target_block="W", loop="i"),
                                    "requires all the consumer(s) of the given block to be present under the "
                                    "target loop"),
    "compute_at_loop_of_block": ("chain", S("compute_at", block="Y", target_block="Z", loop="ax0"),
                                 "block 'Z' has no loop 'ax0'"),
    "reverse_compute_at_producer_outside": ("chain4", S("reverse_compute_at", block="W", target_block="Y", loop="j"),
                                            "requires all the producer(s)"),
    "inline_reduction": ("mm", S("compute_inline", block="C"), "TVM refused: The block has init statement: block 'C'"),
    "inline_output": ("chain", S("compute_inline", block="Z"), "The block 'Z' is an output block"),
    "reverse_inline_first": ("chain", S("reverse_compute_inline", block="Y"),
                             "TVM refused: The block is only allowed to read a single buffer region"),
    "decompose_not_reduction": ("chain", S("decompose_reduction", block="Y", loop="i"), "is not a reduction block"),
    "transform_argument": ("chain", S("transform_layout", block="Z", write_index=0, factors=[1, 2], perm=[0, 2, 1]),
                           "Z is an argument of the kernel: its stored layout is a layout action"),
    "transform_factor_count": ("chain", S("transform_layout", block="Y", write_index=0, factors=[2], perm=[0, 1]),
                               "factors needs one positive integer per dim of Y (shape [32, 32]"),
    "transform_factor_divides": ("chain", S("transform_layout", block="Y", write_index=0, factors=[1, 5],
                                            perm=[0, 1, 2]), "factor 5 does not divide dim 1 of Y (extent 32)"),
    "transform_perm": ("chain", S("transform_layout", block="Y", write_index=0, factors=[1, 2], perm=[0, 1]),
                       "perm must order all 3 dims after the splits (0..2), got [0, 1]"),
    "transform_write_index": ("chain", S("transform_layout", block="Y", write_index=1, factors=[1, 2],
                                         perm=[0, 1, 2]), "write_index 1 is out of range"),
}


@pytest.mark.parametrize("case", list(FAILURES), ids=list(FAILURES))
def test_refused_step_names_the_step_and_the_reason(case):
    kname, step, fragment = FAILURES[case]
    func = KERNELS[kname].func
    before = script(func)
    with pytest.raises(LoopError) as err:
        apply_step(func, step)
    msg = str(err.value)
    assert fragment in msg
    assert msg.startswith(f"{step}: ") and f"{step.primitive}(" in msg
    assert len(msg) < 600 and msg.count("\n") <= 2 and "s_tir.SBlock#" not in msg and "^^^" not in msg
    assert script(func) == before


def test_a_loop_partition_made_past_its_first_range_is_not_partitioned_again():
    """TVM 0.27 partitions a loop that starts past 0 as if it started at 0, dropping its last
    iterations: refused, the kernel unchanged; the loop knows where it starts."""
    sch = apply_step(KERNELS["chain"].func, S("loop_partition", block="Z", loop="j", factors=[3, None]))
    (second,) = [lp for lp in list_loops(sch, "Z_j1") if lp.name == "j1"]
    assert (second.start, second.extent) == (3, 29)
    before = script(sch.mod["main"])
    with pytest.raises(LoopError, match="loop 'j1' starts at 3: only a loop that starts at 0 can be partitioned"):
        apply_step(sch, S("loop_partition", block="Z_j1", loop="j1", factors=[16, None]))
    assert script(sch.mod["main"]) == before
