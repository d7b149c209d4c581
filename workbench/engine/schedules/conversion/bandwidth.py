"""A conversion kernel timed on this machine: ``conversion_ms`` builds it (after its analytic
schedule, ``steps.conversion_steps``, by default) and times it on random data (the joint stage's
conversion costs; ``measure.conversion_rates`` rates kernels against the copy bandwidth)."""

from __future__ import annotations

import time
from typing import Mapping, Sequence

import numpy as np
import tvm
from tvm import tirx

from ...build import codegen
from ...loops.primitives import apply_steps
from ...base.step import Step
from .steps import conversion_steps

__all__ = ["conversion_ms"]


def conversion_ms(func: tirx.PrimFunc, target: Mapping, steps: Sequence[Step] | None = None,
                  kernel: str = "conversion", min_s: float = 0.2) -> tuple[float, int]:
    """Build ``func`` (after ``steps``; default ``conversion_steps``) and time it on random data:
    the best of 5 repeats of at least ``min_s`` / 5 seconds each, in ms, and the bytes its
    buffers hold (every input read once, every output written once)."""
    steps = conversion_steps(func, kernel, target) if steps is None else steps
    sch = apply_steps(func, steps)
    lib = codegen.compile(tvm.IRModule({"main": sch.mod["main"]}), target).jit()
    rng = np.random.default_rng(0)
    host = [rng.random([int(n) for n in p.shape], dtype=np.float32) for p in func.params]
    nbytes = sum(x.nbytes for x in host)
    args = [tvm.runtime.tensor(x) for x in host]
    fn = lib["main"]
    fn(*args)  # warm-up
    t0 = time.perf_counter()
    fn(*args)
    one = max(time.perf_counter() - t0, 1e-6)
    number = max(1, int(min_s / 5 / one))
    ev = lib.time_evaluator("main", tvm.cpu(), number=number, repeat=5)
    return min(float(x) for x in ev(*args).results) * 1e3, nbytes
