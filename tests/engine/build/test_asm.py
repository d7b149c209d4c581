"""Reading a kernel's assembly: FMAs, spills and the hot loop, on kernels built here."""

import numpy as np
from tvm import te

from workbench.engine.build.asm import kernel_asm, summarize_asm
from workbench.engine.build.targets import vector_unit

TARGET = {"kind": "llvm", "num-cores": 1}


def _matmul(vectorized: bool):
    import tvm

    a, b = te.placeholder((64, 64), name="a"), te.placeholder((64, 64), name="b")
    k = te.reduce_axis((0, 64), name="k")
    c = te.compute((64, 64), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    func = te.create_prim_func([a, b, c])
    if not vectorized:
        return func
    sch = tvm.s_tir.Schedule(func)
    blk = sch.get_sblock("c")
    i, j, kk = sch.get_loops(blk)
    lanes = vector_unit(TARGET).lanes
    jo, ji = sch.split(j, [None, lanes])
    sch.reorder(i, jo, kk, ji)
    sch.vectorize(ji)
    return sch.mod["main"]


def test_a_vectorized_matmul_has_vector_fmas_in_its_hot_loop():
    s = summarize_asm(kernel_asm(_matmul(True), TARGET))
    assert s.vector_fma >= 1 and s.hot is not None and s.hot_vector_fma >= 1
    assert s.vector_bits >= 256 and s.notes()[0].startswith("hot loop: ")


def test_a_scalar_matmul_is_called_out():
    """The reduction innermost: LLVM keeps a float sum in order, so the hot loop is scalar."""
    s = summarize_asm(kernel_asm(_matmul(False), TARGET))
    notes = " ".join(s.notes())
    assert s.hot_vector_fma == 0 and ("FMAs are scalar" in notes or "no loop with an FMA" in notes), notes


def test_spills_and_reloads_are_read_from_llvms_comments():
    asm = "\n".join(["L5:", "  vmovaps %ymm3, 64(%rsp)  # 32-byte Spill", "  vfmadd231ps 64(%rsp), %ymm1, %ymm2",
                     "  vmovaps 96(%rsp), %ymm4  # 32-byte Reload", "  jne L5", "  mulss %xmm0, %xmm1"])
    s = summarize_asm(asm)
    assert (s.spills, s.reloads, s.hot_stack, s.scalar_math, s.vector_bits) == (1, 1, 3, 1, 256)
    assert "2 spills and reloads, 1 access to arrays on the stack (not spills)" in s.notes()[0], s.notes()
    # stack traffic with no Spill / Reload comment is a stack array, not spills (the metrics say 0 spills)
    local = summarize_asm("\n".join(["L5:", "  vmovss 8(%rsp), %xmm0", "  vfmadd231ss 12(%rsp), %xmm1, %xmm0",
                                      "  jne L5"]))
    assert (local.spills, local.hot_stack, local.hot_spills) == (0, 2, 0)
    assert "spill" not in local.notes()[0].replace("(not spills)", ""), local.notes()
    assert np.isclose(s.hot_instructions, 4)
