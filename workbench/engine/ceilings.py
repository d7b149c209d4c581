"""This machine's ceilings for the roofline: peak FLOP rate, memory bandwidth, cache sizes.

Both rates are measured with kernels that TVM builds for the session's target, so they are the
ceilings *that target* can reach (a target without ``mcpu`` may not use every vector unit):

- peak: a parallel, vectorized kernel of independent fused multiply-add chains (8 chains per
  core hide the FMA latency); 2 FLOPs per FMA;
- bandwidth: STREAM's copy (``b = a``) and triad (``a = b + s * c``) over arrays far larger than
  the caches (at least 64 MiB each and 4x the last-level cache, capped at 256 MiB to keep the
  measurement short), counting the bytes STREAM counts (2 resp. 3 arrays per element);
- caches and line size: read from ``/sys/devices/system/cpu/cpu0/cache``, else from
  ``getconf -a`` (glibc asks CPUID), else ``DEFAULT_CACHES`` (32 KiB / 1 MiB / 32 MiB, 64 B
  lines: a typical x86 server core), with a note saying which.

Measured once per target and CPU, then cached as JSON under ``$ALT_WORKBENCH_CACHE``
(default ``~/.cache/alt-workbench``); ``get_ceilings(target, refresh=True)`` or
``python -m workbench ceilings`` measures again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

__all__ = ["Ceilings", "get_ceilings", "measure_ceilings", "format_ceilings", "cache_info", "cpu_name"]

_SYS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
#: used when the operating system does not tell (a typical x86 server core)
DEFAULT_CACHES = {"L1d": 32 * 1024, "L2": 1024 * 1024, "L3": 32 * 1024 * 1024}
_MIB = 1024 * 1024


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

    @property
    def bandwidth_gbs(self) -> float:
        """The memory roof: the better of copy and triad."""
        return max(self.copy_gbs, self.triad_gbs)

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the roofs meet."""
        return self.peak_gflops / self.bandwidth_gbs

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Ceilings":
        return Ceilings(**{**d, "caches": {k: int(v) for k, v in d["caches"].items()}})


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": _MIB, "G": 1024 * _MIB}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _getconf_caches() -> tuple[dict[str, int], int]:
    """Data cache sizes and line size from glibc's ``getconf`` (it asks CPUID); empty if unknown."""
    import subprocess

    try:
        out = subprocess.run(["getconf", "-a"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return {}, 0
    vals = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            vals[parts[0]] = int(parts[1])
    names = {"L1d": "LEVEL1_DCACHE_SIZE", "L2": "LEVEL2_CACHE_SIZE", "L3": "LEVEL3_CACHE_SIZE"}
    caches = {k: vals[v] for k, v in names.items() if vals.get(v, 0) > 0}
    return caches, vals.get("LEVEL1_DCACHE_LINESIZE", 0)


def cache_info(root: Path = _SYS_CACHE, getconf: bool = True) -> tuple[dict[str, int], int, str]:
    """Data cache sizes by level, the line size, and a note when a fallback had to be used:
    ``root`` (sysfs) first, then ``getconf`` (if allowed), then ``DEFAULT_CACHES`` and 64 B."""
    caches, line = {}, 0
    try:
        for idx in sorted(root.glob("index*")):
            kind = (idx / "type").read_text().strip()
            if kind == "Instruction":
                continue
            level = int((idx / "level").read_text())
            caches["L1d" if level == 1 else f"L{level}"] = _size((idx / "size").read_text())
            line = line or int((idx / "coherency_line_size").read_text())
    except (OSError, ValueError):
        caches = {}
    if caches:
        return caches, line or 64, ""
    if getconf:
        caches, line = _getconf_caches()
        if caches:
            return caches, line or 64, f"cache sizes unreadable from {root}: taken from getconf"
    return dict(DEFAULT_CACHES), 64, f"cache sizes unreadable from {root}: typical defaults used"


def _build(func: Any, target: Mapping) -> Any:
    import tvm

    from .program import target_from

    return tvm.compile(tvm.IRModule({"main": func}), target=target_from(target)).jit()


def _seconds(rt: Any, args: list, min_s: float = 0.05) -> float:
    """Best-of-3 time of one call, each repeat long enough (``min_s``) to be trustworthy."""
    import tvm

    t0 = time.perf_counter()
    rt["main"](*args)
    number = max(1, int(min_s / max(time.perf_counter() - t0, 1e-6)))
    return min(rt.time_evaluator("main", tvm.cpu(), number=number, repeat=3)(*args).results)


def _peak_gflops(target: Mapping, cores: int) -> float:
    import tvm
    from tvm.script import tirx as T

    chains, lanes, iters, par = 8, 16, 20000, 4 * cores

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

    rt = _build(main, target)
    x = tvm.runtime.tensor(np.random.default_rng(0).random((par, chains, lanes), dtype=np.float32))
    y = tvm.runtime.tensor(np.zeros((par, chains, lanes), np.float32))
    return 2.0 * par * chains * lanes * iters / _seconds(rt, [x, y]) / 1e9


def _stream_gbs(target: Mapping, elems: int) -> tuple[float, float]:
    import tvm
    from tvm.script import tirx as T

    lanes, rows = 16, elems // 16

    @T.prim_func
    def copy(a: T.Buffer((rows, lanes), "float32"), b: T.Buffer((rows, lanes), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i in T.parallel(rows):
            for v in T.vectorized(lanes):
                b[i, v] = a[i, v]

    @T.prim_func
    def triad(b: T.Buffer((rows, lanes), "float32"), c: T.Buffer((rows, lanes), "float32"),
              a: T.Buffer((rows, lanes), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i in T.parallel(rows):
            for v in T.vectorized(lanes):
                a[i, v] = b[i, v] + T.float32(3.0) * c[i, v]

    rng = np.random.default_rng(0)
    arrs = [tvm.runtime.tensor(rng.random((rows, lanes), dtype=np.float32)) for _ in range(3)]
    t_copy = _seconds(_build(copy, target), arrs[:2], min_s=0.1)
    t_triad = _seconds(_build(triad, target), arrs, min_s=0.1)
    nbytes = rows * lanes * 4
    return 2 * nbytes / t_copy / 1e9, 3 * nbytes / t_triad / 1e9


def measure_ceilings(target: Mapping) -> Ceilings:
    """Measure now (a few seconds)."""
    caches, line, note = cache_info()
    cores = int(target.get("num-cores", os.cpu_count() or 1))
    llc = max(caches.values())
    size = min(max(64 * _MIB, 4 * llc), 256 * _MIB)
    if size < 4 * llc:
        note = (note + "; " if note else "") + (f"the OS reports a {llc // _MIB} MiB last-level cache: the bandwidth "
                                                f"arrays are capped at {size // _MIB} MiB each")
    copy_gbs, triad_gbs = _stream_gbs(target, size // 4)
    return Ceilings(cpu_name(), dict(target), _peak_gflops(target, cores), copy_gbs, triad_gbs, caches, line, note=note)


def _cache_file(target: Mapping) -> Path:
    root = Path(os.environ.get("ALT_WORKBENCH_CACHE") or Path.home() / ".cache" / "alt-workbench")
    key = hashlib.sha256(json.dumps([dict(target), cpu_name()], sort_keys=True).encode()).hexdigest()[:16]
    return root / "ceilings" / f"{key}.json"


def get_ceilings(target: Mapping, refresh: bool = False) -> Ceilings:
    """The cached ceilings of ``target`` on this CPU, measured first if needed (or if ``refresh``)."""
    path = _cache_file(target)
    if not refresh:
        try:
            return Ceilings.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            pass  # missing or unreadable: measure again
    c = measure_ceilings(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(c.to_json(), indent=1))
    os.replace(tmp, path)
    return c


def format_ceilings(c: Ceilings) -> str:
    """A short table for the terminal."""
    rows = [("CPU", c.cpu), ("target", json.dumps(c.target)),
            ("peak (FMA kernel)", f"{c.peak_gflops:.1f} GFLOP/s"),
            ("bandwidth: copy", f"{c.copy_gbs:.1f} GB/s"), ("bandwidth: triad", f"{c.triad_gbs:.1f} GB/s"),
            ("ridge point", f"{c.ridge:.1f} FLOP/byte"), ("cache line", f"{c.line_bytes} B")]
    rows += [(name, f"{size // 1024} KiB") for name, size in c.caches.items()]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    return "\n".join(lines + ([f"note: {c.note}"] if c.note else []))
