"""A loop nest as text: the same for any form of a kernel, a whole schedule in a few lines, loop
names as list_loops gives them (in the indices too), an imperfect split's predicate."""

from __future__ import annotations

from textwrap import dedent

import pytest
import tvm
from tvm import s_tir

from tests.engine.loops.kernels import EXAMPLES, check_numerics
from workbench.engine.base.errors import LoopError
from workbench.engine.loops.functions import (cache_read, cache_write, compute_at, decompose_reduction, fuse, parallel,
                                              reorder, split, unroll, vectorize)
from workbench.engine.loops.nest import list_loops
from workbench.engine.loops.outline import outline


def _text(s: str) -> str:
    return dedent(s).strip("\n")


def test_outline_reads_any_form_of_a_kernel_the_same_way():
    func = EXAMPLES["matmul"].func
    text = outline(func)
    assert outline(tvm.IRModule({"main": func})) == text == outline(s_tir.Schedule(func)) == outline(func)
    assert text == _text("""
        for i in range(16):
          for j in range(16):
            for k in range(16):
              block C:
                init: C[i, j] = 0.0
                C[i, j] = C[i, j] + A[i, k] * B[k, j]""")
    with pytest.raises(LoopError, match="expected a PrimFunc"):
        outline("not a function")


def test_outline_of_a_full_schedule(rng):
    kernel = EXAMPLES["matmul"]
    sch = reorder(split(kernel.func, "C", "j", [None, 8]), "C", ["k", "j_1"])
    sch = parallel(fuse(sch, "C", ["i", "j_0"]), "C", "i_j_0_fused")
    sch = cache_read(sch, "C", 1)
    sch = compute_at(sch, "B_global", "C", "i_j_0_fused")
    sch = cache_write(sch, "C", 0)
    sch = unroll(vectorize(sch, "C", "j_1"), "C", "k")
    sch = decompose_reduction(sch, "C", "k")
    assert outline(sch) == _text("""
        for i_j_0_fused in range(32):  # parallel
          for ax0 in range(16):
            for ax1 in range(8):
              block B_global: B_global[ax0, i_j_0_fused % 2 * 8 + ax1] = B[ax0, i_j_0_fused % 2 * 8 + ax1]
          for j_1_init in range(8):  # vectorized
            block C_init: C_global[i_j_0_fused // 2, i_j_0_fused % 2 * 8 + j_1_init] = 0.0
          for k in range(16):  # unrolled
            for j_1 in range(8):  # vectorized
              block C_update: C_global[i_j_0_fused // 2, i_j_0_fused % 2 * 8 + j_1] = \
C_global[i_j_0_fused // 2, i_j_0_fused % 2 * 8 + j_1] + A[i_j_0_fused // 2, k] * B_global[k, i_j_0_fused % 2 * 8 + j_1]
        for ax0 in range(16):
          for ax1 in range(16):
            block C_global: C[ax0, ax1] = C_global[ax0, ax1]""")
    check_numerics(kernel, sch, rng, rtol=1e-5)


def test_outline_names_loops_as_list_loops_does_in_the_indices_too(rng):
    kernel = EXAMPLES["matmul"]
    sch = cache_read(cache_write(kernel.func, "C", 0), "C_global", 0, "local")
    sch = compute_at(sch, "C_global_local", "C_global", "ax0")  # a second ax0 under the first
    assert [lp.name for lp in list_loops(sch, "C_global_local")] == ["ax0", "ax0_1"]
    assert outline(sch).splitlines()[6:10] == [
        "for ax0 in range(16):",
        "  for ax0_1 in range(16):",
        "    block C_global_local: C_global_local[ax0, ax0_1] = C_global[ax0, ax0_1]",
        "  for ax1 in range(16):"]
    check_numerics(kernel, sch, rng, rtol=1e-5)


def test_outline_shows_the_predicate_of_an_imperfect_split(rng):
    kernel = EXAMPLES["chain"]
    sch = split(kernel.func, "Z", "j", [None, 5])
    assert outline(sch).splitlines()[3:] == [
        "for i in range(16):",
        "  for j_0 in range(4):",
        "    for j_1 in range(5):",
        "      block Z: Z[i, j_0 * 5 + j_1] = Y[i, j_0 * 5 + j_1] + 1.0  # where j_0 * 5 + j_1 < 16"]
    check_numerics(kernel, sch, rng, rtol=1e-5)
