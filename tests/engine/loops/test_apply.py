"""Applying loop steps: each primitive applied, checked on its loops, its numerics and its replay
(step by step, all at once, from its trace); a step never changes what it is applied to."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings, strategies as st

from tests.engine.loops.kernels import FULL_MATMUL, KERNELS, check_numerics, loop_table
from workbench.engine.base.errors import LoopError
from workbench.engine.loops.apply import apply_step, apply_steps
from workbench.engine.loops.nest import list_blocks, list_loops, script
from workbench.engine.loops.specs import PRIMITIVES, loop_step
from workbench.engine.loops.trace import apply_trace_json, trace_json

S = loop_step

CASES = {  # id: (kernel, steps, block to look at, its blocks after, that block's loops after)
    "split": ("mm", [S("split", block="C", loop="i", factors=[None, 8])], "C", ["C"],
              [("i_0", 8, "serial"), ("i_1", 8, "serial"), ("j", 64, "serial"), ("k", 64, "serial")]),
    "split3": ("mm", [S("split", block="C", loop="k", factors=[4, 4, 4])], "C", ["C"],
               [("i", 64, "serial"), ("j", 64, "serial"), ("k_0", 4, "serial"), ("k_1", 4, "serial"),
                ("k_2", 4, "serial")]),
    "split_imperfect": ("chain", [S("split", block="Z", loop="j", factors=[None, 5])], "Z", ["Y", "Z"],
                        [("i", 32, "serial"), ("j_0", 7, "serial"), ("j_1", 5, "serial")]),
    "loop_partition": ("chain", [S("loop_partition", block="Z", loop="j", factors=[3, None, 5]),
                                 S("vectorize", block="Z_j1", loop="j1")], "Z_j1",
                       ["Y", "Z_j_common", "Z_j0_partition", "Z_j0", "Z_j1_partition", "Z_j1", "Z_j2_partition",
                        "Z_j2"], [("j1", 24, "vectorized")]),
    "reorder": ("mm", [S("reorder", block="C", loops=["k", "i"])], "C", ["C"],
                [("k", 64, "serial"), ("j", 64, "serial"), ("i", 64, "serial")]),
    "fuse": ("mm", [S("fuse", block="C", loops=["i", "j"])], "C", ["C"],
             [("i_j_fused", 4096, "serial"), ("k", 64, "serial")]),
    "vectorize": ("mm", [S("split", block="C", loop="j", factors=[None, 16]),
                         S("reorder", block="C", loops=["j_0", "k", "j_1"]),
                         S("vectorize", block="C", loop="j_1")], "C", ["C"],
                  [("i", 64, "serial"), ("j_0", 4, "serial"), ("k", 64, "serial"), ("j_1", 16, "vectorized")]),
    "unroll": ("mm", [S("unroll", block="C", loop="k")], "C", ["C"],
               [("i", 64, "serial"), ("j", 64, "serial"), ("k", 64, "unrolled")]),
    "parallel": ("mm", [S("parallel", block="C", loop="i")], "C", ["C"],
                 [("i", 64, "parallel"), ("j", 64, "serial"), ("k", 64, "serial")]),
    "cache_read": ("mm", [S("cache_read", block="C", read_index=1)], "B_global", ["B_global", "C"],
                   [("ax0", 64, "serial"), ("ax1", 64, "serial")]),
    "cache_write": ("mm", [S("cache_write", block="C", write_index=0, scope="global")], "C_global",
                    ["C", "C_global"], [("ax0", 64, "serial"), ("ax1", 64, "serial")]),
    "compute_at": ("chain", [S("compute_at", block="Y", target_block="Z", loop="i")], "Y", ["Y", "Z"],
                   [("i", 32, "serial"), ("ax0", 32, "serial")]),
    "reverse_compute_at": ("chain", [S("reverse_compute_at", block="Z", target_block="Y", loop="i")], "Z",
                           ["Y", "Z"], [("i", 32, "serial"), ("ax0", 32, "serial")]),
    "compute_inline": ("chain", [S("compute_inline", block="Y")], "Z", ["Z"],
                       [("i", 32, "serial"), ("j", 32, "serial")]),
    "reverse_compute_inline": ("chain", [S("reverse_compute_inline", block="Z")], "Y", ["Y"],
                               [("i", 32, "serial"), ("j", 32, "serial")]),
    "decompose_reduction": ("mm", [S("decompose_reduction", block="C", loop="j")], "C_init",
                            ["C_init", "C_update"], [("i", 64, "serial"), ("j_init", 64, "serial")]),
    "transform_layout": ("mm", [S("cache_write", block="C", write_index=0, scope="local"),
                                 S("transform_layout", block="C", write_index=0, factors=[1, 2], perm=[0, 2, 1])],
                         "C_local", ["C", "C_local"], [("ax0", 64, "serial"), ("ax1", 64, "serial")]),
    "full_matmul": ("mm", FULL_MATMUL, "C_update", ["B_global", "C_init", "C_update", "C_global"],
                    [("i_0_j_0_fused", 32, "parallel"), ("k", 64, "serial"), ("i_1", 8, "unrolled"),
                     ("j_1", 16, "vectorized")]),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_primitive_changes_loops_keeps_numerics_and_replays(case, rng):
    kname, steps, block, blocks, loops = CASES[case]
    kernel = KERNELS[kname]
    before = script(kernel.func)
    sch = apply_steps(kernel.func, steps)
    assert list_blocks(sch) == blocks
    assert loop_table(sch, block) == loops
    text = script(sch)
    for b in blocks:  # every listed loop name is the name TVMScript prints
        for lp in list_loops(sch, b):
            assert re.search(rf"\b{lp.name}\b", text), (b, lp.name)
    check_numerics(kernel, sch, rng)
    assert script(kernel.func) == before  # the input is unchanged
    assert script(apply_steps(kernel.func, steps)) == text  # replay gives the same kernel and names
    again = kernel.func
    for step in steps:  # one step at a time is the same as all at once
        again = apply_step(again, step)
    assert script(again) == text
    saved = json.loads(json.dumps(trace_json(sch)))  # the trace survives a JSON file
    assert script(apply_trace_json(kernel.func, saved)) == text


def test_every_primitive_is_covered():
    covered = {s.primitive for _, steps, *_ in CASES.values() for s in steps}
    assert covered == set(PRIMITIVES)


def test_step_applied_to_a_schedule_leaves_that_schedule_alone():
    sch = apply_step(KERNELS["mm"].func, S("split", block="C", loop="i", factors=[None, 8]))
    text, n = script(sch), len(sch.trace.insts)
    after = apply_step(sch, S("fuse", block="C", loops=["i_1", "j"]))
    assert script(sch) == text and len(sch.trace.insts) == n
    assert loop_table(after, "C")[1] == ("i_1_j_fused", 512, "serial")
    with pytest.raises(LoopError):
        apply_step(sch, S("vectorize", block="C", loop="k"))
    assert script(sch) == text and len(sch.trace.insts) == n


def test_apply_steps_names_the_failing_step():
    func = KERNELS["mm"].func
    steps = [S("split", block="C", loop="i", factors=[None, 8]), S("parallel", block="C", loop="i_0"),
             S("vectorize", block="C", loop="i")]
    with pytest.raises(LoopError, match=r"^step 2: vectorize\(block='C', loop='i'\): block 'C' has no loop 'i'; "
                                        r"its loops: i_0, i_1, j, k"):
        apply_steps(func, steps)
    with pytest.raises(LoopError, match=r"^step 0: .*expected a loop Step"):
        apply_steps(func, [{"primitive": "split"}])


def test_decompose_reduction_renames_the_block():
    sch = apply_step(KERNELS["mm"].func, S("decompose_reduction", block="C", loop="k"))
    with pytest.raises(LoopError, match="unknown block 'C'; blocks: C_init, C_update"):
        apply_step(sch, S("parallel", block="C", loop="i"))


@settings(max_examples=15)
@given(outer=st.sampled_from([1, 2, 4, 8, 16, 32, 64]), infer=st.sampled_from([None, 0, 1]))
def test_split_of_any_divisor_gives_the_factors_as_extents(outer, infer):
    factors: list[int | None] = [outer, 64 // outer]
    if infer is not None:
        factors[infer] = None
    sch = apply_step(KERNELS["mm"].func, S("split", block="C", loop="j", factors=factors))
    assert loop_table(sch, "C")[1:3] == [("j_0", outer, "serial"), ("j_1", 64 // outer, "serial")]

