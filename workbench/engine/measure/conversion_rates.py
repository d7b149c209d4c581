"""The stand-alone layout-conversion kernels of a measured program, as rates: a conversion
computes nothing, so what it is worth is how close it moves its bytes to a copy's speed
(STREAM's copy, ``ceilings.copy_gbs``).

>>> r = ConversionRate.of("convert_x", 6_000_000, 0.5, copy_gbs=20.0)
>>> (r.gbs, r.percent_of_copy)
(12.0, 60.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..build.program import Program

__all__ = ["ConversionRate", "conversion_rates", "conversion_bytes"]


@dataclass(frozen=True)
class ConversionRate:
    """One stand-alone conversion kernel: ``bytes`` read + written (every element of its source
    read once, every element of its destination written once: padding and an unfold's
    duplicated halos count on the written side as stored), its latency (the median), its rate
    and that rate in percent of ``copy_gbs``."""

    name: str
    bytes: int
    latency_ms: float
    gbs: float
    percent_of_copy: float

    @staticmethod
    def of(name: str, nbytes: int, latency_ms: float, copy_gbs: float) -> "ConversionRate":
        """The rate of ``nbytes`` moved in ``latency_ms`` (0 GB/s for a latency of 0)."""
        gbs = nbytes / (latency_ms * 1e6) if latency_ms > 0 else 0.0
        return ConversionRate(name, nbytes, latency_ms, gbs, 100.0 * gbs / copy_gbs if copy_gbs > 0 else 0.0)


def conversion_bytes(program: Program, kernel: str) -> int:
    """Bytes a kernel reads and writes: each of its buffers (``program.funcs[kernel]``'s
    parameters, as stored) once."""
    return buffer_bytes(program.funcs[kernel])


def buffer_bytes(func: Any) -> int:
    """Bytes of a PrimFunc's buffers (its parameters, as stored), each once."""
    return sum(int(np.prod([int(n) for n in p.shape])) * np.dtype(str(p.dtype)).itemsize for p in func.params)


def conversion_rates(program: Program, latencies: Mapping[str, float], copy_gbs: float) -> list[ConversionRate]:
    """The rate of every stand-alone conversion kernel of ``program`` (the plan's kernels with a
    ``conversion``; conversions fused into an op's kernel have no time of their own), in plan
    order, from ``latencies`` (kernel name -> median ms, e.g. ``{t.name: t.latency_ms for t in
    Built.time(...)}``; a kernel without one is left out), against ``copy_gbs`` (e.g.
    ``get_ceilings(target).copy_gbs``). ``gbs`` is ``bytes / latency``; ``percent_of_copy`` is
    ``100 * gbs / copy_gbs``."""
    return [ConversionRate.of(k.name, conversion_bytes(program, k.name), latencies[k.name], copy_gbs)
            for k in program.plan.kernels if k.conversion is not None and k.name in latencies]
