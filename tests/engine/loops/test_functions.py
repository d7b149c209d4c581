"""The loop primitives as functions: each one on a `before` kernel, its outline after, its numerics,
the very schedule apply_step gives for the same step, and the same refusal."""

from __future__ import annotations

import inspect
from textwrap import dedent

import pytest

from tests.engine.loops.kernels import EXAMPLES, check_numerics
from workbench.engine.base.errors import LoopError
from workbench.engine.loops import functions
from workbench.engine.loops.apply import apply_step
from workbench.engine.loops.nest import script
from workbench.engine.loops.outline import outline
from workbench.engine.loops.specs import PRIMITIVES, loop_step
from workbench.engine.loops.trace import trace_json


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
    kernel = EXAMPLES[kname]
    before = script(kernel.func)
    sch = getattr(functions, name)(kernel.func, **args)
    assert outline(sch) == _text(expected)
    check_numerics(kernel, sch, rng, rtol=1e-5)
    same = apply_step(kernel.func, loop_step(name, **args))
    assert script(sch) == script(same) and trace_json(sch) == trace_json(same)
    assert script(kernel.func) == before


def test_one_function_per_primitive_taking_its_spec_arguments_with_an_example():
    assert set(CASES) == set(REFUSALS) == set(PRIMITIVES) and set(functions.__all__) == set(PRIMITIVES) | {"outline"}
    for name, spec in PRIMITIVES.items():
        fn = getattr(functions, name)
        params = inspect.signature(fn).parameters
        assert list(params) == ["func_or_sch", *spec.args], name
        assert {k: p.default for k, p in params.items() if p.default is not p.empty} == spec.defaults, name
        assert f">>> print(outline({name}(" in inspect.getdoc(fn), name


REFUSALS = {  # primitive: (before kernel, its arguments, the LoopError's message)
    "split": ("double", dict(block="B", loop="i", factors=[3, 16]),
              "split(block='B', loop='i', factors=[3, 16]): split factors [3, 16] multiply to 48 but loop 'i' has "
              "extent 64"),
    "loop_partition": ("double", dict(block="B", loop="i", factors=[1, 64]),
                       "loop_partition(block='B', loop='i', factors=[1, 64]): loop_partition counts [1, 64] add up to "
                       "65 but loop 'i' has extent 64"),
    "reorder": ("matmul", dict(block="C", loops=["i", "i"]),
                "reorder(block='C', loops=['i', 'i']): a loop is named twice in ['i', 'i']"),
    "fuse": ("matmul", dict(block="C", loops=["i", "k"]),
             "fuse(block='C', loops=['i', 'k']): fuse needs 2 or more consecutive loops, outermost first; got ['i', 'k']"),
    "vectorize": ("matmul", dict(block="C", loop="k"),
                  "vectorize(block='C', loop='k'): loop 'k' feeds a reduction iterator of block 'C': only spatial "
                  "loops can be vectorized"),
    "unroll": ("double", dict(block="B", loop="j"), "unroll(block='B', loop='j'): block 'B' has no loop 'j'; its loops: i"),
    "parallel": ("matmul", dict(block="C", loop="k"),
                 "parallel(block='C', loop='k'): loop 'k' feeds a reduction iterator of block 'C': only spatial loops "
                 "can be parallel"),
    "cache_read": ("matmul", dict(block="C", read_index=2),
                   "cache_read(block='C', read_index=2, scope='global'): read_index 2 is out of range: block 'C' has 2 "
                   "read buffer(s): A, B"),
    "cache_write": ("double", dict(block="B", write_index=1),
                    "cache_write(block='B', write_index=1, scope='global'): write_index 1 is out of range: block 'B' "
                    "has 1 written buffer(s): B"),
    "compute_at": ("chain", dict(block="Z", target_block="Y", loop="i"),
                   "compute_at(block='Z', target_block='Y', loop='i'): TVM refused: The block 'Z' is an output block"),
    "reverse_compute_at": ("chain", dict(block="Z", target_block="Z", loop="i"),
                           "reverse_compute_at(block='Z', target_block='Z', loop='i'): reverse_compute_at moves a block "
                           "under a loop of another block; both are 'Z'"),
    "compute_inline": ("matmul", dict(block="C"),
                       "compute_inline(block='C'): TVM refused: The block has init statement: block 'C'"),
    "reverse_compute_inline": ("matmul", dict(block="C"),
                               "reverse_compute_inline(block='C'): TVM refused: The block has init statement: block 'C'"),
    "decompose_reduction": ("chain", dict(block="Y", loop="i"),
                            "decompose_reduction(block='Y', loop='i'): TVM refused: The block 'Y' is not a reduction "
                            "block - it violates condition #1. Definition of a reduction block: 1) The block has the "
                            "`init` statement"),
    "transform_layout": ("chain", dict(block="Z", write_index=0, factors=[1, 4], perm=[0, 2, 1]),
                         "transform_layout(block='Z', write_index=0, factors=[1, 4], perm=[0, 2, 1]): Z is an argument "
                         "of the kernel: its stored layout is a layout action (transform_layout changes buffers the "
                         "kernel allocates, such as a cache_write's tile)"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refusal_is_apply_steps_and_leaves_the_input_alone(name):
    kname, args, message = REFUSALS[name]
    func = EXAMPLES[kname].func
    before = script(func)
    with pytest.raises(LoopError) as err:
        getattr(functions, name)(func, **args)
    with pytest.raises(LoopError) as same:
        apply_step(func, loop_step(name, **args))
    assert str(err.value) == str(same.value) == message and script(func) == before
