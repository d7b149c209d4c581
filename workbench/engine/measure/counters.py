"""Hardware counters of one kernel with Linux ``perf`` (the ALT paper's Table 3): instructions,
L1 data loads, L1 load misses and L1 stores per call.

The kernel runs in a child process (``perf stat`` over it) N times and 0 times; the difference
divided by N is what one call costs, without the interpreter's start-up. Where ``perf`` is
missing or the machine does not expose the counters (a VM without a virtual PMU, or
``perf_event_paranoid`` too high), the result says why instead, and the app shows the model only.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EVENTS", "Counters", "perf_unavailable", "kernel_counters", "perf_counters"]

EVENTS = ("instructions", "L1-dcache-loads", "L1-dcache-load-misses", "L1-dcache-stores")

_RUNNER = """
import json, sys, numpy as np, tvm
lib, kernel, shapes, n = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
f = tvm.runtime.load_module(lib)[kernel]
rng = np.random.default_rng(0)
args = [tvm.runtime.tensor(rng.random(s, dtype=np.float32)) for s in shapes]
for _ in range(n):
    f(*args)
"""


@dataclass(frozen=True)
class Counters:
    available: bool
    reason: str = ""
    per_call: dict[str, float] = field(default_factory=dict)


def _stat(cmd: list[str], timeout: float = 120.0) -> tuple[dict[str, float], str]:
    """Run ``perf stat -x,`` on ``cmd``: the counts, and a reason when some are missing."""
    try:
        r = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(EVENTS), "--", *cmd], capture_output=True,
                           text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {}, f"perf could not run: {e}"
    counts, missing = {}, []
    for line in r.stderr.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or parts[2] not in EVENTS:
            continue
        try:
            counts[parts[2]] = float(parts[0])
        except ValueError:
            missing.append(f"{parts[2]} {parts[0]}")
    if missing or len(counts) < len(EVENTS):
        why = ", ".join(missing) if missing else (r.stderr.strip().splitlines() or ["no output"])[-1]
        return counts, f"perf cannot read these hardware counters here: {why}"
    return counts, ""


@functools.cache
def perf_unavailable() -> str:
    """Why counters cannot be read on this machine ('' when they can)."""
    if shutil.which("perf") is None:
        return "the perf tool is not installed (Debian: linux-perf)"
    _, reason = _stat(["true"], timeout=30.0)
    if reason:
        try:
            paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
            reason += f" (perf_event_paranoid = {paranoid}; a VM may expose no hardware PMU)"
        except OSError:
            pass
    return reason


def kernel_counters(built: Any, kernel: str, calls: int = 20) -> Counters:
    """Counters per call of ``kernel`` of a ``program.Built`` (a reason instead, where perf cannot)."""
    reason = perf_unavailable()
    if reason:
        return Counters(False, reason)
    k = next(k for k in built.program.plan.kernels if k.name == kernel)
    shapes = [list(built.program.plan.buffers[b].layout.shape) for b in k.inputs + k.outputs]
    with tempfile.TemporaryDirectory() as tmp:
        lib = str(Path(tmp) / "kernels.so")
        built.executable.export_library(lib)
        base = [sys.executable, "-c", _RUNNER, lib, kernel, json.dumps(shapes)]
        loaded, why0 = _stat(base + ["0"])
        ran, why1 = _stat(base + [str(calls)])
    if why0 or why1:
        return Counters(False, why0 or why1)
    return Counters(True, per_call={e: max(0.0, (ran[e] - loaded[e]) / calls) for e in EVENTS})


def perf_counters(built: Any, kernel: str, calls: int = 20) -> Counters:
    """``kernel_counters`` that never raises: where the export, the child process or the kernel
    name fails, the result has ``available=False`` and the reason (the page's "model only")."""
    try:
        return kernel_counters(built, kernel, calls)
    except Exception as e:  # noqa: BLE001 - a reason, not a crash
        return Counters(False, f"counters could not be read: {type(e).__name__}: {e}")
