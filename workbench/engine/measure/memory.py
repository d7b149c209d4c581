"""The memory roof and the caches. Bandwidth: STREAM's copy (``b = a``) and triad
(``a = b + s * c``), built by TVM for the target, over arrays far larger than the caches (at
least 64 MiB each and 4x the last-level cache, capped at 256 MiB to keep the measurement short),
counting the bytes STREAM counts (2 resp. 3 arrays per element). Caches and line size: read from
``/sys/devices/system/cpu/cpu0/cache``, else from ``getconf -a`` (glibc asks CPUID), else
``DEFAULT_CACHES`` (a typical x86 server core), with a note saying which.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .peak import best_seconds, build_main

__all__ = ["DEFAULT_CACHES", "MIB", "cache_info", "stream_copy", "stream_gbs", "stream_bytes"]

_SYS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
#: used when the operating system does not tell (a typical x86 server core)
DEFAULT_CACHES = {"L1d": 32 * 1024, "L2": 1024 * 1024, "L3": 32 * 1024 * 1024}
MIB = 1024 * 1024


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": MIB, "G": 1024 * MIB}.get(text[-1:], 1)
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

def stream_copy(elems: int) -> Any:
    """STREAM's copy ``b = a`` of ``elems`` float32 (a multiple of 16), parallel and vectorized."""
    from tvm.script import tirx as T

    lanes, rows = 16, elems // 16

    @T.prim_func
    def copy(a: T.Buffer((rows, lanes), "float32"), b: T.Buffer((rows, lanes), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i in T.parallel(rows):
            for v in T.vectorized(lanes):
                b[i, v] = a[i, v]

    return copy


def stream_gbs(target: Mapping, elems: int) -> tuple[float, float]:
    """STREAM copy and triad GB/s over ``elems`` float32 per array."""
    import tvm
    from tvm.script import tirx as T

    lanes, rows = 16, elems // 16
    copy = stream_copy(elems)

    @T.prim_func
    def triad(b: T.Buffer((rows, lanes), "float32"), c: T.Buffer((rows, lanes), "float32"),
              a: T.Buffer((rows, lanes), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i in T.parallel(rows):
            for v in T.vectorized(lanes):
                a[i, v] = b[i, v] + T.float32(3.0) * c[i, v]

    rng = np.random.default_rng(0)
    arrs = [tvm.runtime.tensor(rng.random((rows, lanes), dtype=np.float32)) for _ in range(3)]
    t_copy = best_seconds(build_main(copy, target), arrs[:2], min_s=0.1)
    t_triad = best_seconds(build_main(triad, target), arrs, min_s=0.1)
    nbytes = rows * lanes * 4
    return 2 * nbytes / t_copy / 1e9, 3 * nbytes / t_triad / 1e9


def stream_bytes(caches: Mapping[str, int]) -> int:
    """Bytes per bandwidth array: 4x the last-level cache, within 64-256 MiB."""
    return min(max(64 * MIB, 4 * max(caches.values())), 256 * MIB)
