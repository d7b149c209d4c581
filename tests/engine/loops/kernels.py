"""The small kernels the loop tests schedule, each with its NumPy reference, and the check of a
scheduled kernel against that reference on random data."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import tvm
from tvm import s_tir, te

from workbench.engine.loops.nest import list_loops
from workbench.engine.loops.specs import loop_step

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})


class Kernel(NamedTuple):
    func: tvm.tirx.PrimFunc
    inputs: list[tuple[int, ...]]
    ref: Callable[..., np.ndarray]


def double() -> Kernel:
    """B = A * 2 on 64 elements: one block, ``B``."""
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    return Kernel(te.create_prim_func([A, B]), [(64,)], lambda a: a * 2)


def matmul(n: int) -> Kernel:
    """C = A @ B, n x n: one reduction block, ``C``, over loops i, j, k."""
    A, B = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return Kernel(te.create_prim_func([A, B, C]), [(n, n), (n, n)], lambda a, b: a @ b)


def chain(n: int, blocks: int = 3) -> Kernel:
    """X -> Y = 2X -> Z = Y + 1 (-> W = Z * Z when ``blocks`` is 4), n x n: element-wise blocks."""
    X = te.placeholder((n, n), name="X")
    Y = te.compute((n, n), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute((n, n), lambda i, j: Y[i, j] + 1.0, name="Z")
    if blocks == 3:
        return Kernel(te.create_prim_func([X, Z]), [(n, n)], lambda x: x * 2 + 1)
    W = te.compute((n, n), lambda i, j: Z[i, j] * Z[i, j], name="W")
    return Kernel(te.create_prim_func([X, W]), [(n, n)], lambda x: (x * 2 + 1) ** 2)


def check_numerics(kernel: Kernel, sch: s_tir.Schedule, rng: np.random.Generator, rtol: float = 1e-4) -> None:
    """Build the scheduled kernel and compare it with NumPy on random data."""
    xs = [rng.random(s, dtype="float32") + 0.5 for s in kernel.inputs]
    want = kernel.ref(*xs)
    args = [tvm.runtime.tensor(x) for x in xs] + [tvm.runtime.tensor(np.zeros_like(want))]
    tvm.compile(sch.mod, target=TARGET).jit()["main"](*args)
    np.testing.assert_allclose(args[-1].numpy(), want, rtol=rtol)


def loop_table(sch: s_tir.Schedule, block: str) -> list[tuple[str, int, str]]:
    """The block's loops as (name, extent, kind), outermost first."""
    return [(lp.name, lp.extent, lp.kind) for lp in list_loops(sch, block)]


#: a whole schedule of ``matmul(64)``: every kind of loop, a cache_read and a cache_write moved
#: under the parallel loop, the reduction decomposed
FULL_MATMUL = [
    loop_step("split", block="C", loop="i", factors=[None, 8]), loop_step("split", block="C", loop="j", factors=[4, 16]),
    loop_step("reorder", block="C", loops=["i_0", "j_0", "k", "i_1", "j_1"]),
    loop_step("fuse", block="C", loops=["i_0", "j_0"]), loop_step("parallel", block="C", loop="i_0_j_0_fused"),
    loop_step("cache_read", block="C", read_index=1),
    loop_step("compute_at", block="B_global", target_block="C", loop="i_0_j_0_fused"),
    loop_step("cache_write", block="C", write_index=0),
    loop_step("reverse_compute_at", block="C_global", target_block="C", loop="i_0_j_0_fused"),
    loop_step("vectorize", block="C", loop="j_1"), loop_step("unroll", block="C", loop="i_1"),
    loop_step("decompose_reduction", block="C", loop="k")]

#: the kernels the step tests schedule, by the name their cases use
KERNELS = {"mm": matmul(64), "chain": chain(32), "chain4": chain(32, 4)}

#: the kernels the loop functions' examples start from, as workbench/conftest.py makes them
EXAMPLES = {"double": double(), "chain": chain(16), "matmul": matmul(16)}
