"""A single-operator suite's row (``BenchRow``): its re-measured times, the ratios and
percentages of peak it derives, and results.csv's columns with results.md's titles.
What each column means: benchmarks/README.md, "The suite's columns"."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from workbench.engine.base.timing import NOISE

#: results.csv's columns (README and hooks read ``joint_vs_*``) and results.md's titles, the
#: headline ratio first
TITLES = {"workload": "workload", "op": "op", "budget": "budget",
          "joint_with_conversions_vs_library": "joint+conversions vs library", "joint_vs_library": "joint vs library",
          "library": "library", "library_ms": "library ms",
          "joint_ms": "joint ms", "joint_layout": "joint layout", "joint_conversions_ms": "conversions ms",
          "metaschedule_ms": "MetaSchedule ms", "loop_only_ms": "loop-only (seeded) ms",
          "torch_ms": "PyTorch ms", "torch_compile_ms": "torch.compile ms", "numpy_ms": "NumPy ms",
          "joint_with_conversions_vs_metaschedule": "joint+conversions vs MetaSchedule",
          "joint_vs_metaschedule": "joint vs MetaSchedule",
          "joint_with_conversions_vs_loop_only": "joint+conversions vs loop-only",
          "joint_vs_loop_only": "joint vs loop-only",
          "joint_vs_torch": "joint vs PyTorch", "expert_ms": "expert ms (no search)",
          "expert_vs_library": "expert vs library", "expert_vs_torch": "expert vs PyTorch",
          "pct_peak": "joint % of peak", "loop_only_pct_peak": "loop-only % of peak",
          "expert_pct_peak": "expert % of peak", "peak_gflops": "peak GFLOP/s (in-run)", "peak_note": "peak note",
          "joint_s_per_measurement": "joint s / measurement",
          "joint_conversions_gbs": "conversions GB/s", "joint_conversions_pct_copy": "conversions % of copy",
          "metaschedule_tuning_ms": "MetaSchedule ms (tuning)", "loop_only_tuning_ms": "loop-only ms (tuning)",
          "joint_tuning_ms": "joint ms (tuning)", "metaschedule_spread": "MetaSchedule spread",
          "loop_only_spread": "loop-only spread",
          "joint_spread": "joint spread", "joint_conversions_spread": "conversions spread",
          "expert_spread": "expert spread", "peak_spread": "peak spread", "torch_spread": "PyTorch spread",
          "torch_compile_spread": "torch.compile spread", "numpy_spread": "NumPy spread",
          "rounds": "rounds", "noisy": "noisy", "missing": "missing", "steal_pct": "steal %", "verified": "verified",
          "date": "date", "machine": "machine"}
COLUMNS = list(TITLES)
#: the percentages of the in-run peak, by the kernel they rate
PCT_PEAK = {"pct_peak": "joint", "loop_only_pct_peak": "loop_only", "expert_pct_peak": "expert"}


@dataclass
class BenchRow:
    """One workload's figures. Times are the re-measured medians (None: not run, or missing);
    the ratios and percentages are derived (properties, written as columns by ``as_dict``)."""

    workload: str
    op: str
    budget: int
    joint_layout: str = ""
    verified: bool = False
    date: str = ""
    machine: str = ""
    metaschedule_ms: float | None = None  # MetaSchedule with TVM's defaults, unseeded
    loop_only_ms: float | None = None  # our loop-only stage: MetaSchedule seeded by the expert
    joint_ms: float | None = None
    joint_conversions_ms: float | None = None  # 0: the joint layout converts nothing
    expert_ms: float | None = None  # the default layout's expert schedule alone (the seeded tuners' seed)
    torch_ms: float | None = None  # PyTorch eager, the faster memory format
    numpy_ms: float | None = None
    torch_compile_ms: float | None = None
    library_ms: float | None = None  # the fastest library contender's
    library: str = ""  # which one that was
    missing: str = ""  # the contenders that could not be measured, with their reasons
    metaschedule_tuning_ms: float | None = None
    loop_only_tuning_ms: float | None = None
    joint_tuning_ms: float | None = None
    metaschedule_spread: float | None = None  # relative: (max - min) / median of the re-measure
    loop_only_spread: float | None = None
    joint_spread: float | None = None
    joint_conversions_spread: float | None = None
    expert_spread: float | None = None
    torch_spread: float | None = None
    numpy_spread: float | None = None
    torch_compile_spread: float | None = None
    peak_spread: float | None = None
    rounds: int = 0  # interleaved rounds per set
    noisy: str = ""  # the contenders whose spread stayed above the threshold, and "peak" (see peak_note)
    flops: int = 0  # the op's useful FLOPs
    peak_gflops: float | None = None  # the FMA kernel's rate in this workload's rounds
    joint_s_per_measurement: float | None = None  # the joint tuner's wall time / its measurements
    joint_conversions_gbs: float | None = None  # their bytes / their time (None: no conversion)
    joint_conversions_pct_copy: float | None = None  # that rate against the machine's STREAM copy
    steal_pct: float | None = None  # the CPU time the hypervisor took during the re-measurement, percent

    def __post_init__(self) -> None:
        if self._over_peak() and "peak" not in self.noisy.split(", "):
            self.noisy = ", ".join(n for n in (self.noisy, "peak") if n)

    def _pct_peak(self, ms: float | None) -> float | None:
        if not (ms and self.flops and self.peak_gflops):
            return None
        return 100.0 * self.flops / (ms * 1e6) / self.peak_gflops

    @property
    def pct_peak(self) -> float | None:
        """The joint kernel's useful FLOP rate as a percentage of the in-run FMA peak."""
        return self._pct_peak(self.joint_ms)

    @property
    def loop_only_pct_peak(self) -> float | None:
        """The loop-only kernel's: 100 / this bounds what any layout can gain over it."""
        return self._pct_peak(self.loop_only_ms)

    @property
    def expert_pct_peak(self) -> float | None:
        return self._pct_peak(self.expert_ms)

    def _over_peak(self) -> dict[str, float]:
        """The percentages of peak above 100, by column."""
        return {k: v for k in PCT_PEAK if (v := getattr(self, k)) is not None and v > 100.0}

    @property
    def peak_note(self) -> str:
        """Why the row's percentages of peak are not to be taken as they stand ("": nothing)."""
        notes = [f"{PCT_PEAK[k]} at {v:.0f}% of the FMA kernel's rate in the same rounds: that kernel ran "
                 "slower than this one (a slower moment or clock), so the percentage says nothing of the peak"
                 for k, v in self._over_peak().items()]
        if self.peak_spread is not None and self.peak_spread > NOISE:
            notes.append(f"the FMA kernel's samples spread {self.peak_spread:.0%}")
        return "; ".join(notes)

    def _with_conversions(self) -> float | None:
        """The joint kernel's time with its layout's conversions (a single op pays them)."""
        if self.joint_ms is None or self.joint_conversions_ms is None:
            return None
        return self.joint_ms + self.joint_conversions_ms

    @property
    def joint_with_conversions_vs_library(self) -> float | None:
        """The headline: what a user pays for the op (the kernel and its layout's conversions)
        against the fastest library."""
        return ratio(self.library_ms, self._with_conversions())

    @property
    def joint_vs_library(self) -> float | None:
        return ratio(self.library_ms, self.joint_ms)

    @property
    def joint_vs_metaschedule(self) -> float | None:
        return ratio(self.metaschedule_ms, self.joint_ms)

    @property
    def joint_with_conversions_vs_metaschedule(self) -> float | None:
        return ratio(self.metaschedule_ms, self._with_conversions())

    @property
    def joint_vs_loop_only(self) -> float | None:
        return ratio(self.loop_only_ms, self.joint_ms)

    @property
    def joint_with_conversions_vs_loop_only(self) -> float | None:
        return ratio(self.loop_only_ms, self._with_conversions())

    @property
    def joint_vs_torch(self) -> float | None:
        return ratio(self.torch_ms, self.joint_ms)

    @property
    def expert_vs_library(self) -> float | None:
        return ratio(self.library_ms, self.expert_ms)

    @property
    def expert_vs_torch(self) -> float | None:
        return ratio(self.torch_ms, self.expert_ms)

    def as_dict(self) -> dict[str, Any]:
        """Every column's value (the CSV's: a flagged percentage stays a number, ``noisy`` and
        ``peak_note`` say it is flagged)."""
        d = asdict(self)
        for name in RATIOS + tuple(PCT_PEAK) + ("peak_note",):
            d[name] = getattr(self, name)
        return {k: d[k] for k in COLUMNS}

    def shown(self) -> dict[str, Any]:
        """``as_dict`` as results.md shows it: a percentage of peak above 100 spelled out as
        flagged, never as a plain figure."""
        d = self.as_dict()
        d.update({k: f"over peak ({v:.0f}%)" for k, v in self._over_peak().items()})
        return d


#: the ratios a row derives, the headline first (results.md's footer gives their geometric means)
RATIOS = ("joint_with_conversions_vs_library", "joint_vs_library", "joint_with_conversions_vs_metaschedule",
          "joint_vs_metaschedule", "joint_with_conversions_vs_loop_only", "joint_vs_loop_only", "joint_vs_torch",
          "expert_vs_library", "expert_vs_torch")


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None
