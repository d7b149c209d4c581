"""Reading a loop nest: blocks and loops named as TVMScript prints them, whatever form the kernel
comes in; the walks over its IR; scripts and their diff."""

from __future__ import annotations

import pytest
import tvm
from tvm import te
from tvm.script import tirx as T

from tests.engine.loops.kernels import KERNELS, check_numerics, loop_table
from workbench.engine.base.errors import LoopError
from workbench.engine.loops.apply import apply_step, apply_steps
from workbench.engine.loops.nest import LoopInfo, diff, list_blocks, list_loops, script, visit_nodes
from workbench.engine.loops.specs import loop_step

S = loop_step


def test_loop_info_and_blocks():
    assert list_blocks(KERNELS["chain4"].func) == ["Y", "Z", "W"]
    assert list_loops(KERNELS["mm"].func, "C") == [
        LoopInfo("C", "i", 64, "serial", 0), LoopInfo("C", "j", 64, "serial", 1),
        LoopInfo("C", "k", 64, "serial", 2, reduction=True)]
    mod = tvm.IRModule({"main": KERNELS["mm"].func})
    assert list_blocks(mod) == ["C"] and script(mod) == script(KERNELS["mm"].func)


def test_a_kernel_in_no_known_form_is_a_loop_error():
    with pytest.raises(LoopError, match="expected a PrimFunc"):
        list_blocks("not a function")


def test_a_name_used_further_out_gets_a_suffix_as_the_printer_does(rng):
    steps = [S("cache_write", block="C", write_index=0), S("cache_read", block="C_global", read_index=0, scope="local"),
             S("compute_at", block="C_global_local", target_block="C_global", loop="ax0")]
    sch = apply_steps(KERNELS["mm"].func, steps)
    assert [lp.name for lp in list_loops(sch, "C_global_local")] == ["ax0", "ax0_1"]
    assert "for ax0_1 in range(64)" in script(sch)
    sch = apply_step(sch, S("split", block="C_global_local", loop="ax0_1", factors=[2, 32]))  # the inner one
    assert loop_table(sch, "C_global_local") == [("ax0", 64, "serial"), ("ax0_0", 2, "serial"), ("ax0_1", 32, "serial")]
    check_numerics(KERNELS["mm"], sch, rng)


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


def test_diff_shows_what_a_step_changed():
    func = KERNELS["mm"].func
    d = diff(script(func), script(apply_step(func, S("split", block="C", loop="i", factors=[None, 8]))))
    assert d.startswith("--- before\n+++ after\n")
    assert "-    for i, j, k in T.grid(64, 64, 64):" in d and "+    for i_0, i_1, j, k in T.grid(8, 8, 64, 64):" in d
    assert diff(script(func), script(func)) == ""


def test_visit_nodes_reaches_every_statement_and_expression_under_loops_and_sequences() -> None:
    """Statements are not ``tvm.ir`` nodes in TVM 0.27: the walk still goes through loops,
    sequences and blocks down to the stores and the loads in their values."""
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
