"""Loop primitives: each one applied, checked on its loops, its numerics and its replay; each
documented precondition refused with a LoopError that leaves the input unchanged."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest
import tvm
from hypothesis import given, settings, strategies as st
from tvm import s_tir, te

from workbench.engine.base.errors import LoopError, SessionError
from workbench.engine.loops.primitives import PRIMITIVES, LoopInfo, apply_step, apply_steps, apply_trace_json, basic_schedule, diff, list_blocks, list_loops, loop_step, script, trace_json
from workbench.engine.base.step import Step

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
S = loop_step


class Kernel(NamedTuple):
    func: tvm.tirx.PrimFunc
    inputs: list[tuple[int, ...]]
    ref: Callable[..., np.ndarray]


def _matmul() -> Kernel:
    A, B = te.placeholder((64, 64), name="A"), te.placeholder((64, 64), name="B")
    k = te.reduce_axis((0, 64), "k")
    C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return Kernel(te.create_prim_func([A, B, C]), [(64, 64), (64, 64)], lambda a, b: a @ b)


def _chain(n: int = 3) -> Kernel:
    """X -> Y = 2X -> Z = Y + 1 (-> W = Z * Z when n is 4): element-wise blocks Y, Z (, W)."""
    X = te.placeholder((32, 32), name="X")
    Y = te.compute((32, 32), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute((32, 32), lambda i, j: Y[i, j] + 1.0, name="Z")
    if n == 3:
        return Kernel(te.create_prim_func([X, Z]), [(32, 32)], lambda x: x * 2 + 1)
    W = te.compute((32, 32), lambda i, j: Z[i, j] * Z[i, j], name="W")
    return Kernel(te.create_prim_func([X, W]), [(32, 32)], lambda x: (x * 2 + 1) ** 2)


KERNELS = {"mm": _matmul(), "chain": _chain(), "chain4": _chain(4)}


def _run(kernel: Kernel, sch: s_tir.Schedule) -> None:
    """Build the scheduled kernel and compare it with NumPy on random data."""
    ex = tvm.compile(sch.mod, target=TARGET)
    xs = [np.random.rand(*s).astype("float32") + 0.5 for s in kernel.inputs]
    want = kernel.ref(*xs)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(x, dev) for x in xs] + [tvm.runtime.tensor(np.zeros_like(want), dev)]
    ex.jit()["main"](*args)
    np.testing.assert_allclose(args[-1].numpy(), want, rtol=1e-4)


def _loops(sch: Any, block: str) -> list[tuple[str, int, str]]:
    return [(lp.name, lp.extent, lp.kind) for lp in list_loops(sch, block)]


########## Each primitive: loops after, numerics, replay, trace round trip ##########

FULL_MM = [S("split", block="C", loop="i", factors=[None, 8]), S("split", block="C", loop="j", factors=[4, 16]),
           S("reorder", block="C", loops=["i_0", "j_0", "k", "i_1", "j_1"]),
           S("fuse", block="C", loops=["i_0", "j_0"]), S("parallel", block="C", loop="i_0_j_0_fused"),
           S("cache_read", block="C", read_index=1),
           S("compute_at", block="B_global", target_block="C", loop="i_0_j_0_fused"),
           S("cache_write", block="C", write_index=0),
           S("reverse_compute_at", block="C_global", target_block="C", loop="i_0_j_0_fused"),
           S("vectorize", block="C", loop="j_1"), S("unroll", block="C", loop="i_1"),
           S("decompose_reduction", block="C", loop="k")]

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
    "full_matmul": ("mm", FULL_MM, "C_update", ["B_global", "C_init", "C_update", "C_global"],
                    [("i_0_j_0_fused", 32, "parallel"), ("k", 64, "serial"), ("i_1", 8, "unrolled"),
                     ("j_1", 16, "vectorized")]),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_primitive_changes_loops_keeps_numerics_and_replays(case):
    kname, steps, block, blocks, loops = CASES[case]
    kernel = KERNELS[kname]
    before = script(kernel.func)
    sch = apply_steps(kernel.func, steps)
    assert list_blocks(sch) == blocks
    assert _loops(sch, block) == loops
    text = script(sch)
    for b in blocks:  # every listed loop name is the name TVMScript prints
        for lp in list_loops(sch, b):
            assert re.search(rf"\b{lp.name}\b", text), (b, lp.name)
    _run(kernel, sch)
    assert script(kernel.func) == before  # the input is unchanged
    assert script(apply_steps(kernel.func, steps)) == text  # replay gives the same kernel and names
    again = kernel.func
    for step in steps:  # one step at a time is the same as all at once
        again = apply_step(again, step)
    assert script(again) == text
    saved = json.loads(json.dumps(trace_json(sch)))  # the trace survives a JSON file
    assert script(apply_trace_json(kernel.func, saved)) == text


def test_every_primitive_is_covered_and_named_as_tvm_names_it():
    covered = {s.primitive for _, steps, *_ in CASES.values() for s in steps}
    assert covered == set(PRIMITIVES) == {
        "split", "loop_partition", "reorder", "fuse", "vectorize", "unroll", "parallel", "cache_read", "cache_write", "compute_at",
        "reverse_compute_at", "compute_inline", "reverse_compute_inline", "decompose_reduction", "transform_layout"}
    for name, spec in PRIMITIVES.items():
        assert callable(getattr(s_tir.Schedule, name))
        kinds = {"block", "loop", "loops", "int", "ints", "str", "written", "written_factors", "written_perm"}
        assert spec.doc and set(spec.args.values()) <= kinds
        assert {a.lstrip("*") for a in spec.tvm_args} <= set(spec.args)
        assert set(spec.defaults) <= set(spec.args) and spec.loop_of in spec.args
    assert PRIMITIVES["compute_at"].loop_of == "target_block"
    assert PRIMITIVES["split"].args == {"block": "block", "loop": "loop", "factors": "ints"}


def test_step_applied_to_a_schedule_leaves_that_schedule_alone():
    sch = apply_step(KERNELS["mm"].func, S("split", block="C", loop="i", factors=[None, 8]))
    text, n = script(sch), len(sch.trace.insts)
    after = apply_step(sch, S("fuse", block="C", loops=["i_1", "j"]))
    assert script(sch) == text and len(sch.trace.insts) == n
    assert _loops(after, "C")[1] == ("i_1_j_fused", 512, "serial")
    with pytest.raises(LoopError):
        apply_step(sch, S("vectorize", block="C", loop="k"))
    assert script(sch) == text and len(sch.trace.insts) == n


def test_loop_info_and_blocks():
    assert list_blocks(KERNELS["chain4"].func) == ["Y", "Z", "W"]
    assert list_loops(KERNELS["mm"].func, "C") == [
        LoopInfo("C", "i", 64, "serial", 0), LoopInfo("C", "j", 64, "serial", 1),
        LoopInfo("C", "k", 64, "serial", 2, reduction=True)]
    mod = tvm.IRModule({"main": KERNELS["mm"].func})
    assert list_blocks(mod) == ["C"] and script(mod) == script(KERNELS["mm"].func)


def test_a_name_used_further_out_gets_a_suffix_as_the_printer_does():
    steps = [S("cache_write", block="C", write_index=0), S("cache_read", block="C_global", read_index=0, scope="local"),
             S("compute_at", block="C_global_local", target_block="C_global", loop="ax0")]
    sch = apply_steps(KERNELS["mm"].func, steps)
    assert [lp.name for lp in list_loops(sch, "C_global_local")] == ["ax0", "ax0_1"]
    assert "for ax0_1 in range(64)" in script(sch)
    sch = apply_step(sch, S("split", block="C_global_local", loop="ax0_1", factors=[2, 32]))  # the inner one
    assert _loops(sch, "C_global_local") == [("ax0", 64, "serial"), ("ax0_0", 2, "serial"), ("ax0_1", 32, "serial")]
    _run(KERNELS["mm"], sch)


########## Refusals: LoopError with the reason, input unchanged ##########

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


def test_bad_inputs_are_loop_errors():
    with pytest.raises(LoopError, match="expected a PrimFunc"):
        list_blocks("not a function")
    with pytest.raises(LoopError, match="does not apply to this kernel"):
        apply_trace_json(KERNELS["chain"].func, trace_json(apply_steps(KERNELS["mm"].func, FULL_MM)))
    with pytest.raises(SessionError, match='action 0: field "kind" must be one of'):
        Step.from_json({"args": {}})


def test_a_loop_partition_made_past_its_first_range_is_not_partitioned_again():
    """TVM 0.27 partitions a loop that starts past 0 as if it started at 0 (its last iterations
    dropped: range(3, 64) into [16, 16, rest] gave (3, 16), (16, 32), (32, 61)): refused, the
    kernel unchanged; the loop knows where it starts."""
    sch = apply_step(KERNELS["chain"].func, S("loop_partition", block="Z", loop="j", factors=[3, None]))
    (second,) = [lp for lp in list_loops(sch, "Z_j1") if lp.name == "j1"]
    assert (second.start, second.extent) == (3, 29)
    before = script(sch.mod["main"])
    with pytest.raises(LoopError, match="loop 'j1' starts at 3: only a loop that starts at 0 can be partitioned"):
        apply_step(sch, S("loop_partition", block="Z_j1", loop="j1", factors=[16, None]))
    assert script(sch.mod["main"]) == before


def test_a_loop_whose_extent_varies_is_a_loop_error_naming_it():
    """``compute_at`` under tiles of 5 of C[i] = Y[i // 3] leaves Y a loop of 2 or 3 iterations
    (a count that depends on the tile): listing it says which loop, not a ``TypeError`` from TVM."""
    X = te.placeholder((20,), name="X")
    Y = te.compute((20,), lambda i: X[i] * 2.0, name="Y")
    C = te.compute((60,), lambda i: Y[i // 3], name="C")
    sch = apply_steps(te.create_prim_func([X, C]), [S("split", block="C", loop="i", factors=[None, 5]),
                                                    S("compute_at", block="Y", target_block="C", loop="i_0")])
    assert [lp.extent for lp in list_loops(sch, "C")] == [12, 5]
    with pytest.raises(LoopError, match=r"loop 'ax0' of block 'Y' runs .* every loop needs a constant extent"):
        list_loops(sch, "Y")


########## Steps, traces, scripts ##########

def test_loop_step_hashes_and_round_trips_through_json():
    a = S("split", factors=[None, 8], loop="i", block="C")
    b = Step.from_json(json.loads(json.dumps(a.to_json())))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.args == (("block", "C"), ("loop", "i"), ("factors", (None, 8)))
    assert a.to_json() == {"kind": "loop", "op": "", "primitive": "split",
                           "args": {"block": "C", "loop": "i", "factors": [None, 8]}}
    assert str(a) == "split(block='C', loop='i', factors=[None, 8])"
    assert S("cache_read", block="C", read_index=0) == S("cache_read", block="C", read_index=0, scope="global")


def test_trace_json_is_plain_json_and_replays_like_the_steps():
    sch = apply_steps(KERNELS["mm"].func, FULL_MM)
    saved = trace_json(sch)
    assert json.loads(json.dumps(saved)) == saved
    assert saved[0][0][0] == "GetSBlock"  # the same form MetaSchedule records hold
    replayed = apply_trace_json(KERNELS["mm"].func, saved)
    tvm.ir.assert_structural_equal(replayed.mod, sch.mod)
    assert trace_json(replayed) == saved
    assert script(apply_trace_json(KERNELS["mm"].func, sch.trace.as_json())) == script(sch)


def test_diff_shows_what_a_step_changed():
    func = KERNELS["mm"].func
    d = diff(script(func), script(apply_step(func, S("split", block="C", loop="i", factors=[None, 8]))))
    assert d.startswith("--- before\n+++ after\n")
    assert "-    for i, j, k in T.grid(64, 64, 64):" in d and "+    for i_0, i_1, j, k in T.grid(8, 8, 64, 64):" in d
    assert diff(script(func), script(func)) == ""


@settings(max_examples=15)
@given(outer=st.sampled_from([1, 2, 4, 8, 16, 32, 64]), infer=st.sampled_from([None, 0, 1]))
def test_split_of_any_divisor_gives_the_factors_as_extents(outer, infer):
    factors: list[int | None] = [outer, 64 // outer]
    if infer is not None:
        factors[infer] = None
    sch = apply_step(KERNELS["mm"].func, S("split", block="C", loop="j", factors=factors))
    assert _loops(sch, "C")[1:3] == [("j_0", outer, "serial"), ("j_1", 64 // outer, "serial")]


########## A starting schedule ##########

@pytest.mark.parametrize("kname", ["mm", "chain"])
def test_basic_schedule_applies_and_keeps_numerics(kname):
    kernel = KERNELS[kname]
    steps = basic_schedule(kernel.func)
    sch = apply_steps(kernel.func, steps)
    kinds = {lp.kind for b in list_blocks(sch) for lp in list_loops(sch, b)}
    assert {"parallel", "vectorized"} <= kinds
    _run(kernel, sch)
    if kname == "mm":
        assert [s.primitive for s in steps] == ["reorder", "vectorize", "parallel"]
    else:
        assert list_blocks(sch) == ["Y"]  # Z inlined into Y


def test_visit_nodes_reaches_every_statement_and_expression_under_loops_and_sequences() -> None:
    """Statements are not ``tvm.ir`` nodes in TVM 0.27: the walk still goes through loops,
    sequences and blocks down to the stores and the loads in their values."""
    from tvm.script import tirx as T

    from workbench.engine.loops.primitives import visit_nodes

    @T.prim_func(s_tir=True)
    def two(a: T.Buffer((4, 8), "float32"), b: T.Buffer((4, 8), "float32"), c: T.Buffer((4, 8), "float32")):
        for i in range(4):
            for j in range(8):
                with T.sblock("b"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    b[vi, vj] = a[vi, vj] + T.float32(1.0)
            for j in range(8):
                with T.sblock("c"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    c[vi, vj] = T.if_then_else(vj < 4, b[vi, vj], T.float32(0.0))

    kinds: list[str] = []
    visit_nodes(two.body, lambda n: kinds.append(type(n).__name__))
    loads = sum(k in ("BufferLoad", "TensorLoad") for k in kinds)  # TVM 0.27 names its loads TensorLoad
    assert kinds.count("BufferStore") == 2 and loads == 2
    assert kinds.count("For") == 3 and "SeqStmt" in kinds and "Call" in kinds  # the if_then_else
