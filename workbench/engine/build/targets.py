"""Targets: the default one, the machine's CPU, and what a target's CPU offers a kernel.

A session's target is a JSON dict (TVM 0.27 takes no strings). An ``llvm`` target without
``mcpu`` means *this machine's CPU* (``resolve_target``): TVM alone would compile it for generic
x86-64 (SSE only), far below the FMA peak. Vector width and register count come from the
CPU features LLVM reports for the target, never from a constant: ``llvm_get_vector_width``
answers 512 for every x86 target, so it is not used.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import tvm

from ..base.errors import BuildError

__all__ = ["DEFAULT_TARGET", "host_cpu", "cpu_name", "resolve_target", "target_cores", "target_from", "VectorUnit", "vector_unit",
           "vector_unit_of", "runtime_threads", "use_all_cores"]

#: the target of a new session and of commands given none: this machine's CPU, both cores
DEFAULT_TARGET: dict = {"kind": "llvm", "num-cores": 2}


@functools.cache
def host_cpu() -> str | None:
    """LLVM's name for this machine's CPU (e.g. ``znver3``), None if LLVM cannot tell."""
    try:
        name = str(tvm.target.codegen.llvm_get_system_cpu())
    except Exception:  # noqa: BLE001 - an LLVM-less build
        return None
    return name if name and name != "generic" else None


@functools.cache
def cpu_name() -> str:
    """The CPU's marketing name (``/proc/cpuinfo``), for reports and the sidebar."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def resolve_target(spec: Mapping) -> dict:
    """The target as built: an ``llvm`` target without ``mcpu`` gets this machine's CPU."""
    spec = dict(spec)
    if spec.get("kind") == "llvm" and "mcpu" not in spec and (cpu := host_cpu()):
        spec["mcpu"] = cpu
    return spec


def runtime_threads(topology: Path = Path("/sys/devices/system/cpu/cpu0/topology")) -> int:
    """One worker thread per physical core this process may run on."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:  # "0-1" or "0,4": the logical CPUs sharing cpu0's core
        text = (topology / "thread_siblings_list").read_text().strip()
        siblings = sum(int(b) - int(a) + 1 for a, _, b in (p.partition("-") for p in text.split(",")) if a) \
            if "-" in text else len(text.split(","))
    except (OSError, ValueError):
        siblings = 1
    return max(1, cpus // max(1, siblings))


def use_all_cores() -> None:
    """Give TVM's runtime one thread per physical core (unless ``TVM_NUM_THREADS`` says otherwise).

    Why: TVM assumes two hyper-threads per x86 core and starts half as many threads as logical
    CPUs, so on a machine without SMT every TVM kernel would run on half the cores while PyTorch
    uses them all. The thread pool reads the variable when it starts, at the first parallel kernel,
    so this runs before any build (``target_from``); worker processes started afterwards inherit it."""
    os.environ.setdefault("TVM_NUM_THREADS", str(runtime_threads()))


def target_cores(spec: Mapping) -> int:
    """The cores a target's kernels split their parallel loops among: its ``num-cores``, else
    this machine's CPUs."""
    return int(spec.get("num-cores") or os.cpu_count() or 1)


def target_from(spec: Mapping) -> tvm.target.Target:
    """A TVM target from the session's JSON dict; a bad one is a ``BuildError`` with TVM's reason.
    Every build goes through here, so it first makes sure kernels will run on every core."""
    use_all_cores()
    try:
        return tvm.target.Target(resolve_target(spec))
    except Exception as e:  # TVM raises several types for a bad target
        raise BuildError(f"invalid target {dict(spec)}: {str(e).splitlines()[0]}") from None


@dataclass(frozen=True)
class VectorUnit:
    """What a kernel can count on: fp32 lanes per vector register, architectural vector
    registers, whether there is a fused multiply-add, and the ISA name the numbers came from."""

    lanes: int
    registers: int
    fma: bool
    isa: str


@functools.cache
def _vector_unit(spec_json: str) -> VectorUnit:
    import json

    return vector_unit_of(target_from(json.loads(spec_json)))


def vector_unit_of(target: tvm.target.Target) -> VectorUnit:
    """``vector_unit`` of a built TVM target (a TIR pass reads it from its function's attributes)."""
    try:
        features = set(tvm.target.codegen.llvm_get_cpu_features(target))
    except Exception:  # noqa: BLE001 - not an LLVM CPU target
        features = set()
    if "avx512f" in features:
        return VectorUnit(16, 32, True, "AVX-512")
    if "avx2" in features or "avx" in features:
        return VectorUnit(8, 16, "fma" in features, "AVX2" if "avx2" in features else "AVX")
    if "neon" in features or "asimd" in features:
        return VectorUnit(4, 32, True, "NEON")
    return VectorUnit(4, 16, False, "SSE")


def vector_unit(spec: Mapping) -> VectorUnit:
    """The vector unit of the target's CPU (from LLVM's feature list for it).

    >>> vector_unit({"kind": "llvm", "mcpu": "skylake-avx512"})
    VectorUnit(lanes=16, registers=32, fma=True, isa='AVX-512')
    >>> vector_unit({"kind": "llvm", "mcpu": "haswell"}).lanes
    8
    """
    import json

    return _vector_unit(json.dumps(resolve_target(spec), sort_keys=True))
