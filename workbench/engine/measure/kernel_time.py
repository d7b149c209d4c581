"""One kernel of a built program timed alone, as the tuners time a kernel (TVM's evaluator): what
the benchmarks and the tuning page's baselines compare."""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm

from ..base.interleave import SAMPLE_MS, Timer, call_timer
from ..build.program import Built


def evaluator_timer(rt: Any, name: str, args: list, min_ms: float = SAMPLE_MS) -> Timer:
    """Function ``name`` of a TVM module on ``args``, timed by TVM's evaluator as the tuners
    time a kernel: each sample about ``min_ms``."""
    one = call_timer(lambda: rt[name](*args), min_ms=0.0)()  # warm-up, and one call's time
    ev = rt.time_evaluator(name, tvm.cpu(), number=max(1, int(min_ms / max(one, 1e-6))), repeat=1)
    return lambda: float(ev(*args).results[0]) * 1e3


def kernel_timer(built: Built, op: str, values: dict[str, np.ndarray], min_ms: float = SAMPLE_MS) -> Timer:
    """The kernel ``op`` of a built program alone, on the buffers a run on ``values`` leaves."""
    kernel = next(k for k in built.program.plan.kernels if k.name == op)
    bufs = {name: tvm.runtime.tensor(a) for name, a in built.run_buffers(values).items()}
    return evaluator_timer(built.rt, op, [bufs[b] for b in kernel.inputs + kernel.outputs], min_ms)


def conversions_timer(built: Built, values: dict[str, np.ndarray], min_ms: float = SAMPLE_MS) -> Timer | None:
    """The program's stand-alone conversion kernels, each timed as ``kernel_timer`` times a
    kernel, their times added (None: the program converts nothing)."""
    names = [k.name for k in built.program.plan.kernels if k.conversion is not None]
    timers = [kernel_timer(built, name, values, min_ms / max(len(names), 1)) for name in names]
    return (lambda: sum(t() for t in timers)) if timers else None
