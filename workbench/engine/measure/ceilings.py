"""This machine's ceilings for the roofline, measured with kernels that TVM builds for the
session's target, so they are the ceilings *that target* can reach: the peak FLOP rate of an FMA
kernel (``peak``) and its theoretical peak (lanes x 2 FLOPs x FMA ports x cores x clock, each
factor with its source), STREAM's bandwidth and the cache sizes (``memory``), and the library
yardstick: NumPy's and PyTorch's fp32 GEMM measured in the same run (a library faster than the
measured peak gets a WARNING line in ``format_ceilings``).

Cached as JSON per target and CPU under ``$ALT_WORKBENCH_CACHE`` (default ``~/.cache/alt-workbench``),
with when, how, by which process and in what machine state it was measured. ``get_ceilings``
measures again when the cached figures are older than the process asking or the machine looks
different (``stale_reason``): a peak measured on a shared or virtual machine is no constant.
``get_ceilings(target, refresh=True)`` or ``python -m workbench ceilings`` always measures.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import psutil

from ..build.targets import cpu_name, resolve_target, target_cores
from .machine import MachineState, differs, machine_state
# DEFAULT_CACHES, stream_copy, peak_call and peak_kernel_shape re-exported: the suites' and the
# conversions' benchmarks import them from here
from .memory import DEFAULT_CACHES, MIB, cache_info, stream_bytes, stream_copy, stream_gbs  # noqa: F401
from .peak import FMA_PORTS, cpu_clock, peak_call, peak_gflops, peak_kernel_shape  # noqa: F401

__all__ = ["Ceilings", "Yardstick", "YARDSTICK_N", "DEFAULT_CACHES", "get_ceilings", "measure_ceilings",
           "format_ceilings", "cache_info", "peak_kernel_shape", "peak_call", "library_gemm", "stream_copy",
           "stale_reason", "copy_bandwidth"]

#: the library yardstick's square GEMM size: large enough for the libraries' best kernels
YARDSTICK_N = 2048
#: measurements of the FMA kernel, at most, while a library GEMM runs faster than it
PEAK_RETRIES = 5


@dataclass(frozen=True)
class Yardstick:
    """A library's fp32 GEMM (``n`` x ``n`` x ``n``) rate measured beside the peak kernel."""

    library: str
    n: int
    gflops: float
    threads: int

    @property
    def flops(self) -> int:
        return 2 * self.n ** 3

    @property
    def bytes(self) -> int:
        """Compulsory traffic: A, B and C moved once."""
        return 3 * self.n * self.n * 4

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def label(self) -> str:
        return f"{self.library} GEMM {self.n}"


@dataclass(frozen=True)
class Ceilings:
    cpu: str
    target: dict
    peak_gflops: float
    copy_gbs: float
    triad_gbs: float
    caches: dict[str, int]  # "L1d", "L2", "L3" -> bytes
    line_bytes: int
    measured_at: float = field(default_factory=time.time)
    note: str = ""
    # The theoretical peak's factors and the library yardstick: an older cache file lacks them
    isa: str = ""
    lanes: int = 0
    accumulators: int = 0
    fma_ports: int = 0
    cores: int = 0
    clock_ghz: float = 0.0
    clock_source: str = ""
    library: tuple[Yardstick, ...] = ()
    # How, by which process, in what machine state (MachineState): an older cache file lacks them
    how: str = ""
    pid: int = 0
    machine: dict = field(default_factory=dict)

    @property
    def bandwidth_gbs(self) -> float:
        """The memory roof: the better of copy and triad."""
        return max(self.copy_gbs, self.triad_gbs)

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the roofs meet."""
        return self.peak_gflops / self.bandwidth_gbs

    @property
    def theoretical_gflops(self) -> float | None:
        """lanes x 2 FLOPs per FMA x FMA ports x cores x clock; None when a factor is unknown."""
        if not (self.lanes and self.fma_ports and self.cores and self.clock_ghz):
            return None
        return self.lanes * 2 * self.fma_ports * self.cores * self.clock_ghz

    @property
    def best_library(self) -> Yardstick | None:
        return max(self.library, key=lambda y: y.gflops, default=None)

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Ceilings":
        """Read a cached file; fields it lacks (older files) take their defaults."""
        known = {f.name for f in fields(Ceilings)}
        return Ceilings(**{**{k: v for k, v in d.items() if k in known},
                           "caches": {k: int(v) for k, v in d["caches"].items()},
                           "library": tuple(Yardstick(**y) for y in d.get("library", ()))})


def _best_gflops(matmul: Callable[[], Any], n: int, runs: int) -> float:
    matmul()  # warm-up: thread pool start, page faults, packing buffers
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        matmul()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best / 1e9


def library_gemm(cores: int, n: int = YARDSTICK_N, runs: int = 5) -> tuple[Yardstick, ...]:
    """NumPy's and PyTorch's fp32 ``n``-cube GEMM, best of ``runs``; PyTorch on ``cores`` threads
    (NumPy's BLAS uses its own default: every core). A library that is not installed is left out."""
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    out = [Yardstick("NumPy", n, _best_gflops(lambda: a @ b, n, runs), os.cpu_count() or 1)]
    try:
        import torch
    except ImportError:
        return tuple(out)
    before = torch.get_num_threads()
    torch.set_num_threads(cores)
    try:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        with torch.no_grad():
            out.append(Yardstick("PyTorch", n, _best_gflops(lambda: ta @ tb, n, runs), cores))
    finally:
        torch.set_num_threads(before)  # the caller's setting, not ours
    return tuple(out)


def measure_ceilings(target: Mapping, yardstick_n: int = YARDSTICK_N) -> Ceilings:
    """Measure now (a few seconds): peak, bandwidth, and the library yardstick."""
    state = machine_state()  # before: the measurement loads the cores itself
    caches, line, note = cache_info()
    cores = target_cores(target)
    llc, size = max(caches.values()), stream_bytes(caches)
    if size < 4 * llc:
        note = (note + "; " if note else "") + (f"the OS reports a {llc // MIB} MiB last-level cache: the bandwidth "
                                                f"arrays are capped at {size // MIB} MiB each")
    # TVM's kernels first: once NumPy's and PyTorch's thread pools exist, their idle threads
    # compete with TVM's for the cores and slow the FMA kernel
    shape = peak_kernel_shape(target)
    peak = peak_gflops(target, shape, cores)
    copy_gbs, triad_gbs = stream_gbs(target, size // 4)
    clock, clock_source = cpu_clock()
    library = library_gemm(cores, yardstick_n)
    peak = _peak_beside(library, peak, lambda: peak_gflops(target, shape, cores))
    how = (f"FMA kernel ({shape.describe()}, {cores} parallel tasks): best of 5 calls of 0.1 s or more, measured "
           f"again (up to {PEAK_RETRIES} times) while a library GEMM ran faster; STREAM copy and triad over "
           f"{size // MIB} MiB arrays; NumPy's and PyTorch's {yardstick_n}-cube GEMM, best of 5")
    return Ceilings(cpu_name(), dict(target), peak, copy_gbs, triad_gbs, caches, line, measured_at=state.taken_at,
                    note=note, isa=shape.isa, lanes=shape.lanes, accumulators=shape.accumulators,
                    fma_ports=FMA_PORTS, cores=cores, clock_ghz=clock, clock_source=clock_source, library=library,
                    how=how, pid=os.getpid(), machine=state.to_json())


def _peak_beside(library: tuple[Yardstick, ...], peak: float, measure: Callable[[], float],
                 tries: int = PEAK_RETRIES, pause_s: float = 1.0) -> float:
    """The FMA kernel's rate, measured again (``tries`` times at most, ``pause_s`` apart, once the
    libraries' thread pools are idle) while a library GEMM beats it: on a shared host the same
    kernel's rate moves between runs, and a roof below a library is a slow moment, not the
    machine's peak. The best rate is kept."""
    best = max((y.gflops for y in library), default=0.0)
    for _ in range(tries):
        if peak >= best:
            break
        time.sleep(pause_s)
        peak = max(peak, measure())
    return peak


def _cache_file(target: Mapping) -> Path:
    root = Path(os.environ.get("ALT_WORKBENCH_CACHE") or Path.home() / ".cache" / "alt-workbench")
    # keyed by the target as built: {"kind": "llvm"} and {"kind": "llvm", "mcpu": <this CPU>}
    # compile the same kernels, so they share one measurement
    key = hashlib.sha256(json.dumps([resolve_target(target), cpu_name()], sort_keys=True).encode()).hexdigest()[:16]
    return root / "ceilings" / f"{key}.json"


def stale_reason(c: Ceilings, now: MachineState | None = None, started: float | None = None) -> str:
    """Why cached ceilings ``c`` no longer hold ("" when they do): measured before this process
    started (``started``, default this process's start), or in a machine state that ``differs``
    from ``now`` (default: the machine now)."""
    started = _process_start() if started is None else started
    if c.measured_at < started:
        return (f"measured at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(c.measured_at))} by process "
                f"{c.pid or 'unknown'}, before this process started")
    if not c.machine:
        return "the cache does not say in what machine state it was measured"
    why = differs(MachineState.from_json(c.machine), now or machine_state())
    return f"the machine looks different: {why}" if why else ""


def _process_start() -> float:
    return psutil.Process().create_time()


def get_ceilings(target: Mapping, refresh: bool = False) -> Ceilings:
    """The cached ceilings of ``target`` on this CPU, measured first if there are none, if they
    are stale (``stale_reason``) or if ``refresh``."""
    path = _cache_file(target)
    if not refresh and (cached := _cached(target)) is not None and not stale_reason(cached):
        return cached
    c = measure_ceilings(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(c.to_json(), indent=1))
    os.replace(tmp, path)
    return c


def _cached(target: Mapping) -> Ceilings | None:
    try:
        return Ceilings.from_json(json.loads(_cache_file(target).read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None  # missing or unreadable


def copy_bandwidth(target: Mapping) -> float:
    """STREAM copy GB/s of ``target`` on this CPU: the cached ceilings' when they were measured,
    else TVM's copy kernel alone (seconds; unlike ``get_ceilings`` it starts no NumPy or PyTorch
    thread pool, which would slow the TVM kernels a tuning process measures afterwards)."""
    cached = _cached(target)
    return cached.copy_gbs if cached else stream_gbs(target, stream_bytes(cache_info()[0]) // 4)[0]


def _theory_line(c: Ceilings) -> str:
    if c.theoretical_gflops is None:
        return f"unknown ({c.clock_source or 'not measured'})"
    return (f"{c.theoretical_gflops:.1f} GFLOP/s = {c.lanes} lanes ({c.isa}, LLVM's features of the target) "
            f"x 2 FLOP/FMA x {c.fma_ports} FMA ports (assumed for modern x86) x {c.cores} cores (target "
            f"num-cores) x {c.clock_ghz:.3f} GHz ({c.clock_source})")


def format_ceilings(c: Ceilings) -> str:
    """A short table for the terminal; a WARNING line when a library beats the measured peak."""
    kernel = f" ({c.accumulators} accumulators x {c.lanes} lanes)" if c.accumulators else ""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.measured_at))
    rows = [("CPU", c.cpu), ("target", json.dumps(c.target)),
            ("measured", f"{when}" + (f" by process {c.pid}" if c.pid else "") + (f": {c.how}" if c.how else "")),
            ("peak (FMA kernel)", f"{c.peak_gflops:.1f} GFLOP/s measured{kernel}"),
            ("peak (theoretical)", _theory_line(c))]
    rows += [(f"{y.label} (library)", f"{y.gflops:.1f} GFLOP/s, {y.threads} threads") for y in c.library]
    rows += [("bandwidth: copy", f"{c.copy_gbs:.1f} GB/s"), ("bandwidth: triad", f"{c.triad_gbs:.1f} GB/s"),
             ("ridge point", f"{c.ridge:.1f} FLOP/byte"), ("cache line", f"{c.line_bytes} B")]
    rows += [(name, f"{size // 1024} KiB") for name, size in c.caches.items()]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    if (best := c.best_library) and best.gflops > c.peak_gflops:
        lines.append(f"WARNING: {best.label} runs at {best.gflops:.1f} GFLOP/s, above the measured peak "
                     f"({c.peak_gflops:.1f} GFLOP/s): the roofline's compute roof is too low on this machine")
    return "\n".join(lines + ([f"note: {c.note}"] if c.note else []))
