"""The compute roof: an FMA kernel that TVM builds for the session's target, parallel and
vectorized, of independent fused multiply-add chains sized from the target's vector unit
(``targets.vector_unit``): one vector register per chain, ``FMA_PORTS x FMA_LATENCY`` chains so
both FMA units always have an independent FMA to start, as many as fit the register file beside
the kernel's constants (no stack spills: ``peak_kernel_asm`` shows the assembly); 2 FLOPs per FMA.
A benchmark times it beside its kernels (``peak_call``). The theoretical peak's clock comes from
``cpu_clock``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..build.targets import target_cores, target_from, vector_unit

__all__ = ["FMA_PORTS", "FMA_LATENCY", "PeakKernel", "peak_kernel_shape", "peak_kernel",
           "peak_kernel_asm", "peak_call", "peak_gflops", "cpu_clock", "build_main", "best_seconds"]

_SYS_CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")
_PROC_CPUINFO = Path("/proc/cpuinfo")
#: FMA units per core: two on x86 cores since Haswell and Zen (an assumption: LLVM does not report it)
FMA_PORTS = 2
#: cycles until an FMA's result can feed the next one: 4 on Skylake and Zen 3, 5 on Haswell and
#: Zen 2; the longer one, so that the chains cover both
FMA_LATENCY = 5
#: vector registers the peak kernel holds besides its accumulators: the multiplier and the addend
_PEAK_CONSTANTS = 2


def build_main(func: Any, target: Mapping) -> Any:
    """``func`` built for ``target`` as the module's ``main`` (the runtime module)."""
    import tvm

    return tvm.compile(tvm.IRModule({"main": func}), target=target_from(target)).jit()


def best_seconds(rt: Any, args: list, min_s: float = 0.05, repeat: int = 3) -> float:
    """Best-of-``repeat`` time of one call, each repeat long enough (``min_s``) to be trustworthy."""
    import tvm

    t0 = time.perf_counter()
    rt["main"](*args)
    number = max(1, int(min_s / max(time.perf_counter() - t0, 1e-6)))
    return min(rt.time_evaluator("main", tvm.cpu(), number=number, repeat=repeat)(*args).results)


def cpu_clock(cpufreq: Path = _SYS_CPUFREQ, cpuinfo: Path = _PROC_CPUINFO) -> tuple[float, str]:
    """The core clock in GHz and where it came from: sysfs ``cpuinfo_max_freq``, else the first
    ``cpu MHz`` of ``/proc/cpuinfo`` (the current clock: turbo may run above it), else (0, why)."""
    try:
        return int((cpufreq / "cpuinfo_max_freq").read_text()) / 1e6, f"{cpufreq}/cpuinfo_max_freq"
    except (OSError, ValueError):
        pass
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":", 1)[1]) / 1e3, f"{cpuinfo} 'cpu MHz', the current clock: turbo may exceed it"
    except (OSError, ValueError):
        pass
    return 0.0, f"unknown: neither {cpufreq} nor a 'cpu MHz' line in {cpuinfo}"


@dataclass(frozen=True)
class PeakKernel:
    """The FMA kernel's register plan: ``accumulators`` independent chains of ``lanes``-wide
    vectors, plus ``constants`` broadcast registers, in a file of ``registers``."""

    lanes: int
    accumulators: int
    constants: int
    registers: int
    isa: str

    def describe(self) -> str:
        return (f"{self.accumulators} accumulators x {self.lanes} lanes ({self.isa}), "
                f"{self.constants} constants, {self.registers} vector registers")


def peak_kernel_shape(target: Mapping) -> PeakKernel:
    """Chains enough to keep every FMA port busy (``FMA_PORTS x FMA_LATENCY``), at most what the
    register file holds beside the constants and one scratch register (more would spill).

    >>> peak_kernel_shape({"kind": "llvm", "mcpu": "znver3"}).describe()
    '10 accumulators x 8 lanes (AVX2), 2 constants, 16 vector registers'
    """
    unit = vector_unit(target)
    acc = min(FMA_PORTS * FMA_LATENCY, unit.registers - _PEAK_CONSTANTS - 1)
    return PeakKernel(unit.lanes, acc, _PEAK_CONSTANTS, unit.registers, unit.isa)


def peak_kernel(shape: PeakKernel, par: int, iters: int) -> Any:
    """The FMA kernel as a PrimFunc: ``par`` parallel tasks, each ``iters`` rounds of one FMA per
    accumulator (unrolled) on registers loaded once, stored once."""
    from tvm.script import tirx as T

    chains, lanes = shape.accumulators, shape.lanes

    @T.prim_func
    def main(x: T.Buffer((par, chains, lanes), "float32"), y: T.Buffer((par, chains, lanes), "float32")):
        T.func_attr({"tirx.noalias": True})
        for p in T.parallel(par):
            acc = T.alloc_buffer((chains, lanes), "float32", scope="local")
            for c in T.unroll(chains):
                for v in T.vectorized(lanes):
                    acc[c, v] = x[p, c, v]
            for _ in range(iters):
                for c in T.unroll(chains):
                    for v in T.vectorized(lanes):
                        acc[c, v] = acc[c, v] * T.float32(0.9999) + T.float32(0.0001)
            for c in T.unroll(chains):
                for v in T.vectorized(lanes):
                    y[p, c, v] = acc[c, v]

    return main


def peak_kernel_asm(target: Mapping, shape: PeakKernel | None = None) -> str:
    """The assembly LLVM emits for the peak kernel (the target's own shape unless ``shape``
    is given), to check its hot loop for FMAs and spills."""
    import tvm

    func = peak_kernel(shape or peak_kernel_shape(target), 2, 1000)
    return tvm.compile(tvm.IRModule({"main": func}), target=target_from(target)).mod.inspect_source("asm")


def peak_call(target: Mapping, shape: PeakKernel | None = None, cores: int | None = None) -> tuple[Any, list, int]:
    """The FMA kernel built for ``target`` (its module: call ``main``), its arguments, and the
    FLOPs one call does: one task per core, each call ~1 ms at 100 GFLOP/s per core, so the
    parallel launch (~10 us) costs about 1%."""
    import tvm

    shape = shape or peak_kernel_shape(target)
    par, iters = cores or target_cores(target), 200_000
    rt = build_main(peak_kernel(shape, par, iters), target)
    dims = (par, shape.accumulators, shape.lanes)
    x = tvm.runtime.tensor(np.random.default_rng(0).random(dims, dtype=np.float32))
    y = tvm.runtime.tensor(np.zeros(dims, np.float32))
    return rt, [x, y], 2 * par * shape.accumulators * shape.lanes * iters


def peak_gflops(target: Mapping, shape: PeakKernel, cores: int) -> float:
    """The FMA kernel's rate on ``cores`` parallel tasks, in GFLOP/s."""
    rt, args, flops = peak_call(target, shape, cores)
    # best of 5, as the library yardstick: a shared machine's busy moment must not decide the roof
    return flops / best_seconds(rt, args, min_s=0.1, repeat=5) / 1e9

