"""The machine's state at a moment: what a measured rate depends on besides the code.

On a virtual machine the vCPUs, where they run and at what clock change from one minute to the
next, and a measured rate changes with them. So a benchmark records the state at its start and
end (``machine.json`` in its results folder), and the ceilings' cache re-measures when the
machine no longer looks as it did (``differs``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

import psutil

__all__ = ["MachineState", "machine_state", "differs", "steal_pct", "write_machine", "describe", "CLOCK_CHANGE"]

#: a clock that moved by more than this share is another machine, as far as rates go
CLOCK_CHANGE = 0.10


@dataclass(frozen=True)
class MachineState:
    """``vcpus``: logical CPUs; ``clock_mhz``: the mean current clock the OS reports (0: unknown;
    on a VM often the nominal one, turbo runs above it); ``load1``: the 1-minute load average;
    ``steal_s`` / ``cpu_s``: the CPU time the hypervisor gave to other guests, and all CPU time,
    since boot (``/proc/stat``; ``steal_s`` None where the OS does not count it)."""

    taken_at: float
    vcpus: int
    threads_per_core: int
    clock_mhz: float
    load1: float
    steal_s: float | None
    cpu_s: float

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "MachineState":
        known = {f.name for f in fields(MachineState)}
        return MachineState(**{k: v for k, v in d.items() if k in known})


def machine_state() -> MachineState:
    """The machine now."""
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    physical = psutil.cpu_count(logical=False) or logical
    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError):  # no clock where the OS does not tell
        freq = None
    times = psutil.cpu_times()
    return MachineState(time.time(), logical, max(1, logical // physical), float(freq.current) if freq else 0.0,
                        float(os.getloadavg()[0]), getattr(times, "steal", None), float(sum(times)))


def differs(then: MachineState, now: MachineState) -> str:
    """Why a rate measured in state ``then`` may not hold ``now`` ("" when nothing says so): other
    vCPUs or threads per core, a clock that moved by more than ``CLOCK_CHANGE``, or a load that
    moved by more than half the vCPUs (at least one: a measurement loads the cores itself).

    >>> a = MachineState(0.0, vcpus=2, threads_per_core=1, clock_mhz=2600.0, load1=0.2, steal_s=1.0, cpu_s=100.0)
    >>> differs(a, a)
    ''
    >>> differs(a, replace(a, clock_mhz=3500.0))
    'the clock read 2600 MHz then, 3500 MHz now'
    >>> differs(a, replace(a, load1=1.6))
    'the load was 0.2 then, 1.6 now'
    """
    if (then.vcpus, then.threads_per_core) != (now.vcpus, now.threads_per_core):
        return (f"{then.vcpus} vCPUs, {then.threads_per_core} thread(s) per core then, {now.vcpus} vCPUs, "
                f"{now.threads_per_core} thread(s) per core now")
    if then.clock_mhz and now.clock_mhz and abs(now.clock_mhz - then.clock_mhz) > CLOCK_CHANGE * then.clock_mhz:
        return f"the clock read {then.clock_mhz:.0f} MHz then, {now.clock_mhz:.0f} MHz now"
    if abs(now.load1 - then.load1) > max(1.0, now.vcpus / 2):
        return f"the load was {then.load1:.1f} then, {now.load1:.1f} now"
    return ""


def steal_pct(before: MachineState, after: MachineState) -> float | None:
    """The hypervisor's share of the CPU time between two states, in percent (None: not counted,
    or no time passed).

    >>> a = MachineState(0.0, vcpus=2, threads_per_core=1, clock_mhz=2600.0, load1=0.2, steal_s=1.0, cpu_s=100.0)
    >>> steal_pct(a, replace(a, steal_s=3.0, cpu_s=120.0))
    10.0
    """
    if before.steal_s is None or after.steal_s is None or after.cpu_s <= before.cpu_s:
        return None
    return round(100.0 * (after.steal_s - before.steal_s) / (after.cpu_s - before.cpu_s), 6)


def write_machine(out_dir: Path, start: MachineState, end: MachineState, **extra: Any) -> Path:
    """``machine.json`` in ``out_dir``: the state at the run's start and end, the steal between
    them, and ``extra`` (JSON values), written atomically."""
    path = Path(out_dir) / "machine.json"
    doc = {"start": start.to_json(), "end": end.to_json(), "steal_pct": steal_pct(start, end), **extra}
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def describe(doc: Mapping[str, Any] | None) -> str:
    """A run's ``machine.json`` in a sentence, for a results heading ("" when there is none)."""
    if not doc:
        return ""
    a, b, steal = doc["start"], doc["end"], doc.get("steal_pct")
    peaks = [v for v in (doc.get("peak_gflops") or {}).values() if v]
    return (f"{a['vcpus']} vCPUs, {a['threads_per_core']} thread(s) per core; clock {a['clock_mhz']:.0f} MHz at "
            f"the start, {b['clock_mhz']:.0f} at the end (as the OS reports it); load {a['load1']:.1f} -> "
            f"{b['load1']:.1f}; steal over the run " + (f"{steal:.2f}%" if steal is not None else "not counted")
            + (f"; FMA kernel {_span(peaks)} GFLOP/s in the rounds" if peaks else "")
            + " (machine.json).")


def _span(vals: list[float]) -> str:
    lo, hi = f"{min(vals):.0f}", f"{max(vals):.0f}"
    return lo if lo == hi else f"{lo}-{hi}"
