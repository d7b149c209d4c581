"""A runnable program: the plan's kernels as one TVM IRModule, built with LLVM, run end to end
on random inputs, checked against the reference, and timed per kernel.

Errors are normalised to the two numbers every report uses: ``max_abs_error`` and
``max_rel_error`` = max |out - ref| / max |ref| (relative to the output's scale, so values near
zero do not blow it up).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import tvm

from . import codegen
from ..base.errors import BuildError
from ..ir.graph import Graph
from ..base.interleave import wait_for_quiet
from ..layout.book import LayoutBook
from .lower import lower, stored_constants
from ..layout.propagate import Plan, plan_layouts
from .targets import DEFAULT_TARGET, target_from
from ..base.timing import Stats, measure_until_quiet

__all__ = ["Program", "Built", "KernelTiming", "Verification", "Measurement", "measure", "make_program"]

@dataclass(frozen=True)
class KernelTiming:
    name: str
    stats: Stats
    flops: int

    @property
    def latency_ms(self) -> float:
        """The median."""
        return self.stats.median_ms

    @property
    def spread_ms(self) -> float:
        """Max - min over the repeats."""
        return self.stats.spread_ms

    def row(self) -> dict:
        """The figures every report shows for a kernel."""
        s = self.stats
        return {"name": self.name, "latency_ms": s.median_ms, "min_ms": s.min_ms, "spread_ms": s.spread_ms,
                "repeats": s.repeats, "rounds": s.rounds, "noisy": s.noisy, "gflops": self.gflops,
                "flops": self.flops}

    @property
    def gflops(self) -> float:
        return self.flops / (self.latency_ms * 1e6) if self.latency_ms > 0 else 0.0


@dataclass(frozen=True)
class Verification:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    per_output: dict[str, tuple[float, float]]


@dataclass
class Program:
    """The lowered program of a graph under a set of layouts; ``funcs`` may be rescheduled."""

    plan: Plan
    funcs: dict[str, tvm.tirx.PrimFunc]
    flops: dict[str, int] = field(default_factory=dict)

    @property
    def graph(self) -> Graph:
        return self.plan.graph

    def with_funcs(self, funcs: Mapping[str, tvm.tirx.PrimFunc]) -> "Program":
        return Program(self.plan, {**self.funcs, **funcs}, self.flops)

    def module(self) -> tvm.IRModule:
        return tvm.IRModule({k: f.with_attr("global_symbol", k) for k, f in self.funcs.items()})

    def build(self, target: Mapping = DEFAULT_TARGET) -> "Built":
        tgt = target_from(target)
        try:
            ex = codegen.compile(self.module(), tgt)
        except Exception as e:
            raise BuildError(_build_error(self, tgt, e)) from None
        return Built(self, ex.jit(), ex)


def _build_error(prog: Program, tgt, err: Exception) -> str:
    """Name the kernel that fails by building each alone (only on failure)."""
    for name, f in prog.funcs.items():
        try:
            codegen.compile(tvm.IRModule({name: f}), tgt)
        except Exception as e:
            return f"kernel {name} failed to build: {first_error_line(e)}"
    return f"build failed: {first_error_line(err)}"


def first_error_line(e: Exception) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    for ln in lines:
        if "Error" in ln or "error" in ln:
            return ln.strip()[:500]
    return (lines[-1] if lines else type(e).__name__)[:500]


def output_errors(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """Output -> (max absolute error, that error relative to the largest magnitude of ``want``),
    for every output of ``got`` (``want`` holds the same names)."""
    per = {}
    for t, v in got.items():
        err = float(np.max(np.abs(v.astype(np.float64) - want[t])))
        per[t] = (err, err / max(float(np.max(np.abs(want[t]))), 1e-30))
    return per


@dataclass
class Built:
    program: Program
    rt: object
    executable: object

    def run(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run every kernel in order; return the graph outputs in their original layout."""
        bufs = self.run_buffers(values)
        return {t: bufs[b] for t, b in self.program.plan.outputs.items()}

    def run_buffers(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run every kernel in order; return every buffer as stored (its layout, padding included)."""
        bufs = self._buffers(values)
        for k in self.program.plan.kernels:
            try:
                self.rt[k.name](*(bufs[b] for b in k.inputs + k.outputs))
            except Exception as e:
                raise BuildError(f"kernel {k.name} failed to run: {first_error_line(e)}") from None
        return {name: b.numpy() for name, b in bufs.items()}

    def runner(self, values: Mapping[str, np.ndarray]) -> Callable[[], None]:
        """A call that runs every kernel in order on buffers made once from ``values`` (to time
        the whole program; read nothing back)."""
        bufs = self._buffers(values)
        calls = [(self.rt[k.name], [bufs[b] for b in k.inputs + k.outputs]) for k in self.program.plan.kernels]

        def run() -> None:
            for fn, args in calls:
                fn(*args)

        return run

    def _buffers(self, values: Mapping[str, np.ndarray]) -> dict[str, tvm.runtime.Tensor]:
        plan, dev = self.program.plan, tvm.cpu()
        host = {b.name: values[b.tensor] for b in plan.buffers.values() if b.source == "input"}
        host.update(stored_constants(plan, dict(values)))
        out = {}
        for b in plan.buffers.values():
            arr = host.get(b.name)
            out[b.name] = tvm.runtime.tensor(
                np.ascontiguousarray(arr, dtype="float32") if arr is not None else np.zeros(b.layout.shape, "float32"), dev)
        return out

    def verify(self, values: Mapping[str, np.ndarray] | None = None, rtol: float = 1e-4) -> Verification:
        """Compare every graph output with the reference on (random) inputs."""
        values = dict(values or self.program.graph.random_inputs())
        per = output_errors(self.run(values), self.program.graph.reference(values))
        mabs = max(e for e, _ in per.values())
        mrel = max(r for _, r in per.values())
        return Verification(bool(mrel < rtol), mabs, mrel, per)

    def time(self, values: Mapping[str, np.ndarray] | None = None, repeat: int = 5, min_ms: float = 20.0,
             progress: Callable[[str], None] | None = None) -> list[KernelTiming]:
        """Per-kernel latency statistics (after a warm-up) over ``repeat`` runs of about ``min_ms``
        each; a noisy kernel is measured again (``timing.measure_until_quiet``)."""
        bufs = self._buffers(dict(values or self.program.graph.random_inputs()))
        # Other thread pools spin for a while after their last call (NumPy's BLAS after a
        # verification, PyTorch's, TVM's own): a parallel kernel timed meanwhile waits a
        # scheduler tick (4 ms) for its worker at every launch (a 20-us conversion took 4 ms).
        wait_for_quiet()
        out = []
        for k in self.program.plan.kernels:
            if progress:
                progress(k.name)
            args = [bufs[b] for b in k.inputs + k.outputs]
            fn = self.rt[k.name]
            t0 = time.perf_counter()
            fn(*args)  # warm-up, and the estimate of how many runs fill min_ms
            one = max(time.perf_counter() - t0, 1e-6)
            number = max(1, int(min_ms / 1e3 / one))
            ev = self.rt.time_evaluator(k.name, tvm.cpu(), number=number, repeat=repeat)
            stats = measure_until_quiet(lambda: [float(x) * 1e3 for x in ev(*args).results])
            out.append(KernelTiming(k.name, stats, self.program.flops.get(k.name, 0)))
        return out


@dataclass(frozen=True)
class Measurement:
    """A built program's check against the reference and its per-kernel timings."""

    verification: Verification
    timings: list[KernelTiming]
    built: Built | None = field(default=None, compare=False, repr=False)  # for export_library

    @property
    def total_ms(self) -> float:
        return sum(t.latency_ms for t in self.timings)

    @property
    def total(self) -> Stats:
        """The program's latency: kernel medians, minima and maxima added up."""
        ts = [t.stats for t in self.timings]
        return Stats(sum(s.median_ms for s in ts), sum(s.min_ms for s in ts), sum(s.max_ms for s in ts),
                     min((s.repeats for s in ts), default=0), max((s.rounds for s in ts), default=1))


def measure(program: Program, target: Mapping = DEFAULT_TARGET, seed: int = 0, repeat: int = 5,
            progress: Callable[[str], None] | None = None) -> Measurement:
    """Build, verify on random inputs (seeded) and time every kernel: the one place that does
    all three (the app, replay and the CLI call it).

    Raises ``BuildError`` naming the kernel that fails to build or run, with TVM's message."""
    built = program.build(target)
    values = program.graph.random_inputs(seed)
    return Measurement(built.verify(values), built.time(values, repeat=repeat, progress=progress), built)


def make_program(graph: Graph, book: LayoutBook | None = None) -> Program:
    """Propagate, plan and lower: the default (unscheduled) program for these layouts."""
    plan = plan_layouts(graph, book or LayoutBook())
    flops = {k.name: sum(graph.flops(op) for op in k.ops) for k in plan.kernels}
    return Program(plan, lower(plan), flops)
