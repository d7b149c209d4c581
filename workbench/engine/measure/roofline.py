"""Per-kernel roofline numbers: exact FLOPs, compulsory bytes, intensity, and how close a
measured kernel comes to the ceiling that bounds it.

Compulsory bytes: every buffer the kernel takes (its inputs and outputs, in their stored
layouts, padding included) moved once. A kernel whose intensity (FLOP/byte) lies left of the
ridge point is bounded by bandwidth, right of it by the FMA peak. A kernel whose buffers fit a
cache can beat the (DRAM) memory roof (``RooflinePoint.roof_note`` says why). The libraries'
GEMMs measured with the ceilings are reference points (``reference_points``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import tvm

from .ceilings import Ceilings

__all__ = ["RooflinePoint", "compulsory_bytes", "kernel_point", "program_points", "reference_points"]


@dataclass(frozen=True)
class RooflinePoint:
    """A kernel (``variant``: its layout or schedule) as the roofline plots it.

    >>> from workbench.engine.measure.ceilings import Ceilings
    >>> c = Ceilings("cpu", {"kind": "llvm"}, peak_gflops=100.0, copy_gbs=10.0, triad_gbs=12.0,
    ...              caches={"L1d": 32768}, line_bytes=64)
    >>> relu = RooflinePoint("relu", "NCHW", flops=10**6, bytes=8 * 10**6, latency_ms=1.0)
    >>> relu.intensity, relu.gflops, relu.bound(c), relu.attainable(c), relu.percent_of_roof(c)
    (0.125, 1.0, 'memory', 1.5, 66.66666666666667)
    """

    kernel: str
    variant: str
    flops: int
    bytes: int
    latency_ms: float | None

    @property
    def intensity(self) -> float:
        """FLOP per byte of compulsory traffic."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def gflops(self) -> float | None:
        return self.flops / (self.latency_ms * 1e6) if self.latency_ms else None

    def attainable(self, c: Ceilings) -> float:
        """GFLOP/s the roofline allows at this intensity."""
        return min(c.peak_gflops, self.intensity * c.bandwidth_gbs)

    def bound(self, c: Ceilings) -> str:
        return "compute" if self.intensity * c.bandwidth_gbs >= c.peak_gflops else "memory"

    def percent_of_roof(self, c: Ceilings) -> float | None:
        """Achieved share of the bounding ceiling, in percent (for a kernel without FLOPs,
        such as a layout conversion: achieved bandwidth over the memory roof)."""
        if not self.latency_ms:
            return None
        if self.flops == 0:
            return 100.0 * self.bytes / (self.latency_ms * 1e6) / c.bandwidth_gbs
        return 100.0 * (self.gflops or 0.0) / self.attainable(c)

    def over_peak(self, c: Ceilings) -> bool:
        """Above the measured FMA peak: the share says the peak was measured low (a slow moment or
        another clock), not how close the kernel comes to the machine's, so it is never shown as
        a plain figure."""
        pct = self.percent_of_roof(c)
        return bool(self.flops) and pct is not None and pct > 100.0 and self.bound(c) == "compute"

    def holding_cache(self, c: Ceilings) -> str | None:
        """The smallest cache that holds all of the kernel's buffers (None: only DRAM does)."""
        fits = [(size, name) for name, size in c.caches.items() if self.bytes <= size]
        return min(fits)[1] if fits else None

    def roof_note(self, c: Ceilings) -> str:
        """Why the kernel is above its roof ("" when it is not): its data sits in a cache the
        repeated timing runs keep warm, or else what the roof does not count. A small kernel,
        such as a padding copy, finds its buffers still in a cache (``holding_cache``) when the
        timing runs it again and again; the ceilings measure no per-cache bandwidth to draw that
        cache's own roof, so a share above 100% is no error:

        >>> from workbench.engine.measure.ceilings import Ceilings
        >>> c = Ceilings("cpu", {"kind": "llvm"}, 100.0, 10.0, 12.0, caches={"L1d": 32768}, line_bytes=64)
        >>> pad = RooflinePoint("pad", "NCHW", flops=0, bytes=16 * 1024, latency_ms=0.001)
        >>> pad.percent_of_roof(c), pad.holding_cache(c)
        (136.53333333333333, 'L1d')
        >>> print(pad.roof_note(c))
        above the DRAM roof: its 16 KiB of buffers fit L1d (32 KiB), where repeated runs find them
        """
        pct = self.percent_of_roof(c)
        if pct is None or pct <= 100.0:
            return ""
        if self.over_peak(c):
            return (f"above the measured FMA peak ({pct:.0f}% of it): the peak was measured low (a slower moment "
                    "or clock than this kernel's); re-measure the ceilings")
        cache = self.holding_cache(c)
        if cache is not None:
            return (f"above the DRAM roof: its {_kib(self.bytes)} of buffers fit {cache} ({_kib(c.caches[cache])}), "
                    "where repeated runs find them")
        return ("above the DRAM roof with buffers larger than every cache: it reads part of its buffers only "
                "(the roof counts each buffer whole) or the bandwidth was measured low")

    def row(self, c: Ceilings) -> dict[str, Any]:
        return {"kernel": self.kernel, "variant": self.variant, "GFLOP": self.flops / 1e9, "MB": self.bytes / 1e6,
                "FLOP/byte": self.intensity, "latency ms": self.latency_ms, "GFLOP/s": self.gflops,
                "bound": self.bound(c) if self.flops else "memory",
                "% of roof": None if self.over_peak(c) else self.percent_of_roof(c),
                "buffers fit": self.holding_cache(c) or "DRAM only", "note": self.roof_note(c)}


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB"


def compulsory_bytes(func: tvm.tirx.PrimFunc) -> int:
    """Bytes of every buffer parameter of the kernel, each moved once."""
    total = 0
    for p in func.params:
        shape = getattr(p, "shape", None)
        if shape is None:
            continue
        total += math.prod(int(s) for s in shape) * tvm.DataType(p.dtype).bits // 8
    return total


def kernel_point(name: str, func: tvm.tirx.PrimFunc, flops: int, latency_ms: float | None = None,
                 variant: str = "") -> RooflinePoint:
    return RooflinePoint(name, variant, int(flops), compulsory_bytes(func), latency_ms)


def program_points(program: Any, latencies: Mapping[str, float] | None = None, variant: str = "") -> list[RooflinePoint]:
    """One point per kernel of a ``Program`` (``latencies``: kernel -> ms, where measured)."""
    lat = dict(latencies or {})
    return [kernel_point(k.name, program.funcs[k.name], program.flops.get(k.name, 0), lat.get(k.name), variant)
            for k in program.plan.kernels]


def reference_points(c: Ceilings) -> list[RooflinePoint]:
    """The library GEMMs measured with the ceilings, as points (variant ``library``): a tuned
    kernel is held against what NumPy and PyTorch reach on the same machine.

    >>> from workbench.engine.measure.ceilings import Ceilings, Yardstick
    >>> ref = reference_points(Ceilings("cpu", {}, 100.0, 10.0, 12.0, {}, 64, library=(Yardstick("PyTorch", 1200, 90.0, 2),)))
    >>> ref[0].kernel, ref[0].variant, ref[0].intensity, round(ref[0].gflops, 6)
    ('PyTorch GEMM 1200', 'library', 200.0, 90.0)
    """
    return [RooflinePoint(y.label, "library", y.flops, y.bytes, y.flops / (y.gflops * 1e6)) for y in c.library]
