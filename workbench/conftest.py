"""pytest setup for the doctests in workbench/engine and workbench/viz (not part of the package API)."""

import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest

# Streamlit scripts run top to bottom when imported: never collect them, even for `pytest workbench`.
collect_ignore = ["app", "pages"]

# Same private cache as tests/conftest.py, for runs that collect only doctests.
_PREFIX = os.path.join(tempfile.gettempdir(), "alt-wb-test-")
if not os.environ.get("ALT_WORKBENCH_CACHE", "").startswith(_PREFIX):
    os.environ["ALT_WORKBENCH_CACHE"] = tempfile.mkdtemp(prefix=os.path.basename(_PREFIX))
    atexit.register(shutil.rmtree, os.environ["ALT_WORKBENCH_CACHE"], ignore_errors=True)


@pytest.fixture(scope="session")
def example_kernels() -> dict:
    """The tiny kernels the loop primitives' examples start from (workbench/engine/loops/functions.py)."""
    from tvm import te  # here, so that the viz doctests never import TVM

    A = te.placeholder((64,), name="A")
    double = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    X = te.placeholder((16, 16), name="X")
    Y = te.compute((16, 16), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = te.compute((16, 16), lambda i, j: Y[i, j] + 1.0, name="Z")
    L, R = te.placeholder((16, 16), name="A"), te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), "k")
    C = te.compute((16, 16), lambda i, j: te.sum(L[i, k] * R[k, j], axis=k), name="C")
    return {"double": te.create_prim_func([A, double]), "chain": te.create_prim_func([X, Z]),
            "matmul": te.create_prim_func([L, R, C])}


@pytest.fixture(autouse=True)
def _doctest_setup(request, doctest_namespace):
    """Doctests may use ``np`` without importing it, and start from a seeded np.random; the
    schedule module's also find its example kernels (only theirs: elsewhere the names could
    shadow a module's own)."""
    kernels = request.getfixturevalue("example_kernels") if request.node.name.startswith(
        "workbench.engine.loops.functions") else {}
    doctest_namespace.update(np=np, **kernels)
    np.random.seed(0)
    yield
    for name in kernels:
        del doctest_namespace[name]
