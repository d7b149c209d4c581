"""Shared by the tuning tests: a small matmul kernel."""

import pytest
import tvm
from tvm import te

from workbench.engine.tuning.records import TuneTask


def matmul(n: int = 64) -> tvm.tirx.PrimFunc:
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


@pytest.fixture
def mm_task() -> TuneTask:
    """``C = A @ B`` on 64x64 floats, as a task named ``mm``."""
    return TuneTask("mm", matmul(), 2 * 64 ** 3)
