"""The invariant of a whole-network tuning: every kernel of the assembled network runs about as
fast as the tuner measured it. A kernel that is much slower runs something else than what was
measured (a schedule swapped, a kernel changed after its measurement), and is named.

``tuned_figures`` reads what the tuner measured from the session's ``tuned`` steps,
``kernel_times`` times each kernel of the built network alone, ``check_kernels`` compares them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..session.session import State

__all__ = ["SLOWER", "KernelCheck", "tuned_figures", "kernel_times", "check_kernels", "check_state", "slow_kernels"]

#: a kernel this much slower in the network than in its tuning is reported
SLOWER = 1.3


@dataclass(frozen=True)
class KernelCheck:
    kernel: str
    tuned_ms: float
    network_ms: float

    @property
    def ratio(self) -> float:
        return self.network_ms / self.tuned_ms

    @property
    def slow(self) -> bool:
        return self.ratio > SLOWER

    def text(self) -> str:
        return (f"kernel {self.kernel} runs at {self.network_ms:.4g} ms in the network, {self.ratio:.2f}x the "
                f"{self.tuned_ms:.4g} ms its tuning measured")

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "tuned_ms": self.tuned_ms, "network_ms": self.network_ms}

    @staticmethod
    def from_json(d: Mapping) -> "KernelCheck":
        return KernelCheck(str(d["kernel"]), float(d["tuned_ms"]), float(d["network_ms"]))


def tuned_figures(state: State) -> dict[str, float]:
    """Each kernel that runs a tuned schedule -> the latency its tuning measured (its last
    ``tuned`` step's ``latency_ms``; a twin's is the measurement of the kernel it equals)."""
    figures: dict[str, float] = {}
    for step in state.session.steps:
        if step.kind == "tuned" and (ms := step.get("latency_ms")):
            figures[step.target] = float(ms)
    return {k: ms for k, ms in figures.items() if k in state.program.funcs and state.kernel_schedule(k).kind == "tuned"}


def kernel_times(state: State, values: Mapping[str, np.ndarray] | None = None) -> dict[str, float]:
    """Each kernel of the state's built network timed alone, on the network's buffers (median ms)."""
    built = state.scheduled_program().build(state.session.target)
    return {t.name: t.latency_ms for t in built.time(values, repeat=3, min_ms=10.0)}


def check_kernels(tuned: Mapping[str, float], timed: Mapping[str, float]) -> list[KernelCheck]:
    """One check per kernel that has both figures, in ``timed``'s order."""
    return [KernelCheck(k, tuned[k], ms) for k, ms in timed.items() if tuned.get(k)]


def check_state(state: State, values: Mapping[str, np.ndarray] | None = None) -> list[KernelCheck]:
    """``check_kernels`` of the state's tuned figures against its kernels timed now."""
    tuned = tuned_figures(state)
    return check_kernels(tuned, kernel_times(state, values)) if tuned else []


def slow_kernels(checks: list[KernelCheck]) -> list[KernelCheck]:
    return [c for c in checks if c.slow]
