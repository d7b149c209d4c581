"""The vectorizable exp/erf/sigmoid/tanh expressions against NumPy and PyTorch, and the kernels
that use them: vector code with no libm call left in the loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import tvm
from tvm import te

from workbench.engine.build.asm import kernel_asm
from workbench.engine.ir.fastmath import fast_erf, fast_exp, fast_sigmoid, fast_tanh
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import target_from

HOST = {"kind": "llvm", "num-cores": 2}


def _values() -> np.ndarray:
    """Random values over every range these functions treat apart: tiny, ordinary, past the clamps."""
    rng = np.random.default_rng(7)
    return np.concatenate([rng.standard_normal(4096) * s for s in (1e-3, 1.0, 4.0, 40.0)] +
                          [np.array([-200.0, -88.5, -4.5, 0.0, 4.5, 88.0, 150.0])]).astype("float32")


def _run(fn, x: np.ndarray) -> np.ndarray:
    X = te.placeholder(x.shape, name="x")
    Y = te.compute(x.shape, lambda i: fn(X[i]), name="y")
    f = tvm.compile(te.create_prim_func([X, Y]), target=target_from(HOST))
    y = tvm.runtime.tensor(np.zeros_like(x))
    f(tvm.runtime.tensor(x), y)
    return y.numpy()


def _erf(x: np.ndarray) -> np.ndarray:
    return torch.erf(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("fn,ref,abs_tol,rel_tol", [
    (fast_exp, np.exp, 1e-38, 1e-5),  # below -88: 0, not a denormal
    (fast_erf, _erf, 1e-6, 0.0),
    (fast_sigmoid, lambda v: 1.0 / (1.0 + np.exp(-v)), 1e-6, 0.0),
    (fast_tanh, np.tanh, 1e-6, 0.0),
], ids=["exp", "erf", "sigmoid", "tanh"])
def test_fast_math_matches_the_exact_function(fn, ref, abs_tol: float, rel_tol: float) -> None:
    x = _values()
    got = _run(fn, x)
    with np.errstate(over="ignore"):
        want = ref(x.astype(np.float64))
    ok = np.isfinite(want) & (np.abs(want) < 1e38)  # float32 overflows past 88.7: not compared
    err = np.abs(got[ok] - want[ok])
    assert np.all(err <= abs_tol + rel_tol * np.abs(want[ok])), float(np.max(err))
    assert np.all(np.isfinite(got[x < 88.0]))


def test_a_gelu_epilogue_is_vector_code_without_erf_calls() -> None:
    b = GraphBuilder("mlp")
    y = b.op("fc", "matmul", b.input("a", (16, 32), "MK"), b.const("fc.weight", (32, 64), "KN"))
    b.op("act", "gelu", y)
    prog = make_program(b.build())
    (kernel,) = prog.funcs
    result = prog.build(HOST).verify()
    assert result.ok, result
    asm = kernel_asm(prog.funcs[kernel], HOST, kernel)
    assert "erf" not in asm.replace(kernel, "")  # no libm call (the kernel's own name aside)
