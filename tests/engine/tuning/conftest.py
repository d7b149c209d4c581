"""Shared by the tuning tests: a small matmul kernel."""

from pathlib import Path

import pytest
import tvm
from tvm import te

from workbench.engine.tuning.records import TuneTask

HERE = Path(__file__).parent


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is a tuning test (marker ``tuning``), new files included:
    ``make test-fast`` leaves them out."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.tuning)
