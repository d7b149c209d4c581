"""Does a scheduled kernel compute what its unscheduled kernel computes?

The unscheduled kernel is what the program tests check against NumPy/PyTorch; a schedule must
not change a result. TVM does not guarantee that: in TVM 0.27 ``reverse_compute_at`` of an
epilogue that pads its output (a conv writing its consumer's halo-padded tiles) keeps only the
iterations that read the tile and silently drops the zero border, and MetaSchedule measures
such a kernel (it does less work, so it looks fast) without checking its output. Every tuned or
expert schedule a tuning applies goes through ``disagreement`` first.

Both kernels run on the same seeded random inputs; every output element starts as NaN, so an
element a schedule forgets to write shows up (NaN where the reference has a number).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import tvm
from tvm import tirx

from ..base.errors import WorkbenchError
from .targets import target_from

__all__ = ["disagreement"]


def disagreement(reference: tirx.PrimFunc, candidate: tirx.PrimFunc, outputs: int, target: Mapping,
                 seed: int = 0, rtol: float = 1e-4) -> str | None:
    """None when ``candidate`` (a scheduled kernel) gives ``reference``'s results on random
    inputs, else one line saying how they differ. ``outputs``: how many of the last parameters
    the kernels write. A candidate that fails to build or run disagrees (with TVM's reason).

    >>> from tvm import te
    >>> x = te.placeholder((8,), name="x")
    >>> y = te.compute((10,), lambda i: te.if_then_else(tvm.tirx.all(i >= 1, i < 9), x[i - 1] * 2.0, 0.0), "y")
    >>> ref = te.create_prim_func([x, y])
    >>> t = {"kind": "llvm", "num-cores": 1}
    >>> disagreement(ref, ref, 1, t) is None
    True
    >>> sch = tvm.s_tir.Schedule(ref)
    >>> _ = sch.split(sch.get_loops(sch.get_sblock("y"))[0], [None, 4])  # 12 iterations, guarded
    >>> disagreement(ref, sch.mod["main"], 1, t) is None
    True
    >>> half = te.compute((10,), lambda i: te.if_then_else(tvm.tirx.all(i >= 1, i < 5), x[i - 1] * 2.0, 0.0), "y")
    >>> disagreement(ref, te.create_prim_func([x, half]), 1, t)[:36]
    'output 0 differs: 4 of 10 elements, '
    """
    tgt = target_from(target)
    rng = np.random.default_rng(seed)
    inputs = [_random(p, rng) for p in reference.params[:len(reference.params) - outputs]]
    try:
        want = _run(reference, tgt, inputs, outputs)
    except Exception as e:  # the reference itself: not the schedule's fault, so no verdict
        raise WorkbenchError(f"the unscheduled kernel failed: {str(e).splitlines()[0][:300]}") from None
    try:
        got = _run(candidate, tgt, inputs, outputs)
    except Exception as e:
        return f"fails to build or run: {str(e).splitlines()[0][:300]}"
    for i, (w, g) in enumerate(zip(want, got)):
        scale = float(np.nanmax(np.abs(w))) if np.isfinite(w).any() else 0.0
        wrong = ~(np.isclose(g, w, rtol=0.0, atol=rtol * max(scale, 1e-30), equal_nan=True))
        if wrong.any():
            diff = np.abs(np.nan_to_num(g.astype(np.float64), nan=np.inf) - w)[wrong]
            return (f"output {i} differs: {int(wrong.sum())} of {w.size} elements, max |diff| "
                    f"{float(diff.max()):.3g} (reference max {scale:.3g})")
    return None


def _random(buf: tirx.Buffer, rng: np.random.Generator) -> np.ndarray:  # TVM 0.27: params are buffers
    shape = [int(d) for d in buf.shape]
    if buf.dtype.startswith("float"):
        return rng.standard_normal(shape).astype(buf.dtype)
    return np.zeros(shape, buf.dtype)  # indices (an opaque gather's): zero is always in range


def _run(func: tirx.PrimFunc, tgt: tvm.target.Target, inputs: list[np.ndarray], outputs: int) -> list[np.ndarray]:
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=tgt)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    outs = []
    for buf in func.params[len(inputs):]:
        unset = np.nan if buf.dtype.startswith("float") else 0
        outs.append(tvm.runtime.tensor(np.full([int(d) for d in buf.shape], unset, buf.dtype), dev))
    lib["main"](*args, *outs)
    return [o.numpy() for o in outs]
