"""The loop primitives as functions: each one on a `before` kernel, its outline after, its numerics,
and the very schedule apply_step gives for the same step; outline on its own."""

from __future__ import annotations

import inspect
from textwrap import dedent
from typing import Callable, NamedTuple

import numpy as np
import pytest
import tvm
from tvm import s_tir, te

from workbench.engine.loops import functions as schedule
from workbench.engine.base.errors import LoopError
from workbench.engine.loops.primitives import PRIMITIVES, apply_step, list_loops, loop_step, script, trace_json
from workbench.engine.loops.functions import cache_read, cache_write, compute_at, decompose_reduction, fuse, outline, parallel, reorder, split, unroll, vectorize

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})


class Kernel(NamedTuple):
    func: tvm.tirx.PrimFunc
    inputs: list[tuple[int, ...]]
    ref: Callable[..., np.ndarray]


def _double() -> Kernel:
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    return Kernel(te.create_prim_func([A, B]), [(64,)], lambda a: a * 2)


def _chain() -> Kernel:
    X = te.placeholder((16, 16), name="X")
    Y = te.compute((16, 16), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute((16, 16), lambda i, j: Y[i, j] + 1.0, name="Z")
    return Kernel(te.create_prim_func([X, Z]), [(16, 16)], lambda x: x * 2 + 1)


def _matmul() -> Kernel:
    A, B = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), "k")
    C = te.compute((16, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return Kernel(te.create_prim_func([A, B, C]), [(16, 16), (16, 16)], lambda a, b: a @ b)


KERNELS = {"double": _double(), "chain": _chain(), "matmul": _matmul()}


def _run(kernel: Kernel, sch: s_tir.Schedule, rng: np.random.Generator) -> None:
    """Build the scheduled kernel and compare it with NumPy on random data."""
    xs = [rng.random(s, dtype="float32") + 0.5 for s in kernel.inputs]
    want = kernel.ref(*xs)
    args = [tvm.runtime.tensor(x) for x in xs] + [tvm.runtime.tensor(np.zeros_like(want))]
    tvm.compile(sch.mod, target=TARGET).jit()["main"](*args)
    np.testing.assert_allclose(args[-1].numpy(), want, rtol=1e-5)


def _text(s: str) -> str:
    return dedent(s).strip("\n")


MATMUL_BODY = """
              block C:
                init: C[i, j] = 0.0
                C[i, j] = C[i, j] + A[i, k] * B[k, j]"""

CASES = {  # primitive: (before kernel, its arguments, outline after)
    "split": ("double", dict(block="B", loop="i", factors=[None, 16]), """
        for i_0 in range(4):
          for i_1 in range(16):
            block B: B[i_0 * 16 + i_1] = A[i_0 * 16 + i_1] * 2.0"""),
    "loop_partition": ("chain", dict(block="Z", loop="i", factors=[None, 4]), """
        for i in range(16):
          for j in range(16):
            block Y: Y[i, j] = X[i, j] * 2.0
        block Z_i_common
          block Z_i0_partition
            for i0 in range(12):
              for j in range(16):
                block Z_i0: Z[i0, j] = Y[i0, j] + 1.0
          block Z_i1_partition
            for i1 in range(12, 16):
              for j in range(16):
                block Z_i1: Z[i1, j] = Y[i1, j] + 1.0"""),
    "reorder": ("matmul", dict(block="C", loops=["k", "i"]), """
        for k in range(16):
          for j in range(16):
            for i in range(16):""" + MATMUL_BODY),
    "fuse": ("matmul", dict(block="C", loops=["i", "j"]), """
        for i_j_fused in range(256):
          for k in range(16):
            block C:
              init: C[i_j_fused // 16, i_j_fused % 16] = 0.0
              C[i_j_fused // 16, i_j_fused % 16] = C[i_j_fused // 16, i_j_fused % 16] + \
A[i_j_fused // 16, k] * B[k, i_j_fused % 16]"""),
    "vectorize": ("chain", dict(block="Y", loop="j"), """
        for i in range(16):
          for j in range(16):  # vectorized
            block Y: Y[i, j] = X[i, j] * 2.0
        for i in range(16):
          for j in range(16):
            block Z: Z[i, j] = Y[i, j] + 1.0"""),
    "unroll": ("matmul", dict(block="C", loop="k"), """
        for i in range(16):
          for j in range(16):
            for k in range(16):  # unrolled""" + MATMUL_BODY),
    "parallel": ("matmul", dict(block="C", loop="i"), """
        for i in range(16):  # parallel
          for j in range(16):
            for k in range(16):""" + MATMUL_BODY),
    "cache_read": ("matmul", dict(block="C", read_index=0, scope="global"), """
        for ax0 in range(16):
          for ax1 in range(16):
            block A_global: A_global[ax0, ax1] = A[ax0, ax1]
        for i in range(16):
          for j in range(16):
            for k in range(16):
              block C:
                init: C[i, j] = 0.0
                C[i, j] = C[i, j] + A_global[i, k] * B[k, j]"""),
    "cache_write": ("chain", dict(block="Z", write_index=0, scope="local"), """
        for i in range(16):
          for j in range(16):
            block Y: Y[i, j] = X[i, j] * 2.0
        for i in range(16):
          for j in range(16):
            block Z: Z_local[i, j] = Y[i, j] + 1.0
        for ax0 in range(16):
          for ax1 in range(16):
            block Z_local: Z[ax0, ax1] = Z_local[ax0, ax1]"""),
    "compute_at": ("chain", dict(block="Y", target_block="Z", loop="j"), """
        for i in range(16):
          for j in range(16):
            block Y: Y[i, j] = X[i, j] * 2.0
            block Z: Z[i, j] = Y[i, j] + 1.0"""),
    "reverse_compute_at": ("chain", dict(block="Z", target_block="Y", loop="i"), """
        for i in range(16):
          for j in range(16):
            block Y: Y[i, j] = X[i, j] * 2.0
          for ax0 in range(16):
            block Z: Z[i, ax0] = Y[i, ax0] + 1.0"""),
    "compute_inline": ("chain", dict(block="Y"), """
        for i in range(16):
          for j in range(16):
            block Z: Z[i, j] = X[i, j] * 2.0 + 1.0"""),
    "reverse_compute_inline": ("chain", dict(block="Z"), """
        for i in range(16):
          for j in range(16):
            block Y: Z[i, j] = X[i, j] * 2.0 + 1.0"""),
    "transform_layout": ("chain", dict(block="Y", write_index=0, factors=[2, 4], perm=[1, 3, 0, 2]), """
        for i in range(16):
          for j in range(16):
            block Y: Y[i % 2, j % 4, i // 2, j // 4] = X[i, j] * 2.0
        for i in range(16):
          for j in range(16):
            block Z: Z[i, j] = Y[i % 2, j % 4, i // 2, j // 4] + 1.0"""),
    "decompose_reduction": ("matmul", dict(block="C", loop="k"), """
        for i in range(16):
          for j in range(16):
            block C_init: C[i, j] = 0.0
            for k in range(16):
              block C_update: C[i, j] = C[i, j] + A[i, k] * B[k, j]"""),
}


@pytest.mark.parametrize("name", list(CASES))
def test_primitive_gives_the_outline_keeps_numerics_and_is_apply_step(name, rng):
    kname, args, expected = CASES[name]
    kernel = KERNELS[kname]
    before = script(kernel.func)
    sch = getattr(schedule, name)(kernel.func, **args)
    assert outline(sch) == _text(expected)
    _run(kernel, sch, rng)
    same = apply_step(kernel.func, loop_step(name, **args))
    assert script(sch) == script(same) and trace_json(sch) == trace_json(same)
    assert script(kernel.func) == before


def test_one_function_per_primitive_taking_its_spec_arguments():
    assert set(CASES) == set(PRIMITIVES) and set(schedule.__all__) == set(PRIMITIVES) | {"outline"}
    for name, spec in PRIMITIVES.items():
        fn = getattr(schedule, name)
        params = inspect.signature(fn).parameters
        assert list(params) == ["func_or_sch", *spec.args], name
        assert {k: p.default for k, p in params.items() if p.default is not p.empty} == spec.defaults, name
        doc = inspect.getdoc(fn)
        for section in ("Parameters", "Returns", "Raises", "Examples"):
            assert f"\n{section}\n" in doc, (name, section)
        assert f">>> print(outline({name}(" in doc and "LoopError: " in doc, name


def test_refusal_is_apply_steps_and_leaves_the_input_alone():
    func = KERNELS["matmul"].func
    before = script(func)
    with pytest.raises(LoopError) as err:
        vectorize(func, "C", "k")
    with pytest.raises(LoopError) as same:
        apply_step(func, loop_step("vectorize", block="C", loop="k"))
    assert str(err.value) == str(same.value) and script(func) == before


########## outline ##########

def test_outline_reads_any_form_of_a_kernel_the_same_way():
    func = KERNELS["matmul"].func
    text = outline(func)
    assert outline(tvm.IRModule({"main": func})) == text == outline(s_tir.Schedule(func)) == outline(func)
    assert text == _text("""
        for i in range(16):
          for j in range(16):
            for k in range(16):""" + MATMUL_BODY)
    with pytest.raises(LoopError, match="expected a PrimFunc"):
        outline("not a function")


def test_outline_of_a_full_schedule(rng):
    kernel = KERNELS["matmul"]
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
    _run(kernel, sch, rng)


def test_outline_names_loops_as_list_loops_does_in_the_indices_too(rng):
    kernel = KERNELS["matmul"]
    sch = cache_read(cache_write(kernel.func, "C", 0), "C_global", 0, "local")
    sch = compute_at(sch, "C_global_local", "C_global", "ax0")  # a second ax0 under the first
    assert [lp.name for lp in list_loops(sch, "C_global_local")] == ["ax0", "ax0_1"]
    assert outline(sch).splitlines()[6:10] == [
        "for ax0 in range(16):",
        "  for ax0_1 in range(16):",
        "    block C_global_local: C_global_local[ax0, ax0_1] = C_global[ax0, ax0_1]",
        "  for ax1 in range(16):"]
    _run(kernel, sch, rng)


def test_outline_shows_the_predicate_of_an_imperfect_split(rng):
    kernel = KERNELS["chain"]
    sch = split(kernel.func, "Z", "j", [None, 5])
    assert outline(sch).splitlines()[3:] == [
        "for i in range(16):",
        "  for j_0 in range(4):",
        "    for j_1 in range(5):",
        "      block Z: Z[i, j_0 * 5 + j_1] = Y[i, j_0 * 5 + j_1] + 1.0  # where j_0 * 5 + j_1 < 16"]
    _run(kernel, sch, rng)
