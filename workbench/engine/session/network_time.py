"""The whole network timed as it runs: the compiled network (``relaxnet``: the Relax VM module
``network.so`` holds), its kernels in the order the VM calls them and by op type, conversions
against compute, and the frameworks that run the same model on the same input beside it.

Correctness first: the network's outputs are checked against the reference before anything is
timed, and each framework's outputs against the same reference. Its kernels' times come from the
VM's instrument hook (each call between its before and after), medians over several runs of the
whole network, so they include what the network does to a kernel (a cache another left warm or
cold). Frameworks (``measure.frameworks``): PyTorch eager and ONNX Runtime (on the module exported
to ONNX) for a built-in network, ONNX Runtime for an imported ONNX file, none for a model of the
op library; made, checked and timed in a sidecar process (``library.Sidecar``), never in the
app's server, their samples interleaved with the network's; one that fails is named with why.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..models import zoo
from ..base.errors import BuildError, first_line
from ..base.interleave import ROUNDS, Timer, call_timer, remeasure
from ..build.relaxnet import build_network
from ..measure.engines import label_error
from ..measure.frameworks import (SAMPLE_MS, exported_onnxruntime_timer, onnxruntime_timer,
                                  relative_error, torch_eager_timer)
from ..measure.library import Sidecar
from .session import State
from ..build.targets import target_cores
from ..base.timing import Stats

__all__ = ["KernelSpan", "Contender", "NetworkTime", "time_network", "CONVERSION", "RTOL"]

#: the op type of a stand-alone layout conversion
CONVERSION = "conversion"
#: outputs whose error relative to the reference's largest magnitude is below this match it
RTOL = 1e-4
#: a framework whose outputs differ more than this (it computes in its own order) is flagged
FRAMEWORK_RTOL = 1e-3
#: the instrumented runs take about this long, in seconds (at least ``MIN_RUNS`` runs, at most ``MAX_RUNS``)
TRACE_S = 0.5
MIN_RUNS, MAX_RUNS = 3, 15
#: the longest wait for quiet before each sample (``interleave.wait_for_quiet``): the last
#: contender's thread pools spin on after it returns; shorter than the benchmarks' for an app
SETTLE_S = 0.5
#: ours' name among the contenders
OURS = "ours (compiled network)"


@dataclass(frozen=True)
class KernelSpan:
    """One kernel of the network's timeline: ``start_ms`` is the sum of the kernels' medians
    before it (in call order), ``stats`` its own time in the network."""

    kernel: str
    op_type: str  # its main op's label (C2D, DEP, GMM, relu...), or CONVERSION
    ops: tuple[str, ...]
    start_ms: float
    stats: Stats

    @property
    def ms(self) -> float:
        return self.stats.median_ms

    @property
    def conversion(self) -> bool:
        return self.op_type == CONVERSION


@dataclass(frozen=True)
class Contender:
    """Ours or a framework on the same input: its latency (None: it could not run, ``note``
    says why), its outputs' error relative to the reference's largest magnitude."""

    name: str
    stats: Stats | None
    max_rel_error: float | None = None
    note: str = ""


@dataclass(frozen=True)
class NetworkTime:
    """What ``time_network`` measured; ``contenders[0]`` is ours, the compiled network."""

    model: str
    kernels: tuple[KernelSpan, ...]
    runs: int  # the instrumented runs the kernels' medians come from
    contenders: tuple[Contender, ...]

    @property
    def network(self) -> Stats:
        stats = self.contenders[0].stats
        assert stats is not None  # ours is always timed: time_network raises otherwise
        return stats

    @property
    def kernels_ms(self) -> float:
        return sum(k.ms for k in self.kernels)

    def by_type(self) -> list[dict]:
        """One row per op type (``op_type``, ``kernels``, ``ms``, ``share`` of the kernels' sum),
        slowest first."""
        rows: dict[str, dict] = {}
        for k in self.kernels:
            row = rows.setdefault(k.op_type, {"op_type": k.op_type, "kernels": 0, "ms": 0.0})
            row["kernels"] += 1
            row["ms"] += k.ms
        total = self.kernels_ms or 1.0
        return sorted(({**r, "share": r["ms"] / total} for r in rows.values()), key=lambda r: -r["ms"])

    def split(self) -> dict[str, float]:
        """The network's time in ms: in compute kernels, in stand-alone conversions, and outside
        any kernel (the VM's own work: allocations, calls; never below zero)."""
        conversions = sum(k.ms for k in self.kernels if k.conversion)
        return {"compute": self.kernels_ms - conversions, CONVERSION: conversions,
                "outside kernels": max(0.0, self.network.median_ms - self.kernels_ms)}


def _op_type(state: State, kernel: Any) -> str:
    if kernel.conversion is not None or not kernel.ops:
        return CONVERSION
    nodes = [state.graph.node(op) for op in kernel.ops]
    return next((n for n in nodes if n.kind == "complex"), nodes[0]).label


def _traced(vm: Any, args: list, kernels: set[str]) -> tuple[list[str], dict[str, list[float]], int]:
    """The kernels in the order one run calls them, and each one's ms in every instrumented run."""
    calls: list[tuple[str, float]] = []

    def instrument(func: Any, name: str, before: bool, *_: Any) -> int:
        if name in kernels:
            calls.append((name, time.perf_counter()))
        return 0  # VMInstrumentReturnKind.NoOp: run the call as usual

    vm.set_instrument(instrument)
    t0 = time.perf_counter()
    vm["main"](*args)
    runs = min(MAX_RUNS, max(MIN_RUNS, int(TRACE_S / max(time.perf_counter() - t0, 1e-6))))
    order = [name for name, _ in calls[::2]]
    calls.clear()
    for _ in range(runs):
        vm["main"](*args)
    times: dict[str, list[float]] = {}
    for (name, start), (_, end) in zip(calls[::2], calls[1::2]):
        times.setdefault(name, []).append((end - start) * 1e3)
    return order, times, runs


class _Remote:
    """A framework's timer in the sidecar: a sample that fails records why (``failed``) and gives
    NaN from then on, so that the rounds go on without it."""

    def __init__(self, timer: Timer) -> None:
        self.timer, self.failed = timer, ""

    def __call__(self) -> float:
        if not self.failed:
            try:
                return self.timer()
            except Exception as e:  # noqa: BLE001 - the framework is marked failed, the others still run
                self.failed = _failure(e)
        return math.nan


#: how ``library.Sidecar`` prefixes the error a maker or a sample raised in it
_SIDECAR_FAILED = "the timing sidecar failed: "
#: what the pipe to a sidecar raises once its process is gone
_ENDED = (EOFError, BrokenPipeError, ConnectionResetError)


def _failure(e: BaseException) -> str:
    """Why a framework failed, in a line: its own error as the sidecar reports it, or the sidecar's."""
    text = str(e)
    if text.startswith(_SIDECAR_FAILED):
        kind, _, msg = text.removeprefix(_SIDECAR_FAILED).partition(": ")
        return f"{kind}: {first_line(RuntimeError(msg))}" if msg.strip() else kind
    if isinstance(e, _ENDED):
        return f"its timing process ended ({type(e).__name__})"
    return f"{type(e).__name__}: {first_line(e)}"


Spec = tuple[str, Callable[..., Timer], tuple]  # a framework: its name, its maker (module level) and arguments


def _framework_specs(model: Mapping, inputs: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
                     threads: int) -> list[Spec]:
    """PyTorch and ONNX Runtime on a built-in network, ONNX Runtime on an imported ONNX file."""
    if model.get("zoo") in zoo.NETWORKS:
        args = (model["zoo"], {k: v for k, v in model.items() if k != "zoo"}, dict(inputs), threads, dict(want))
        return [("PyTorch eager", torch_eager_timer, args), ("ONNX Runtime", exported_onnxruntime_timer, args)]
    if "file" in model and str(model["file"]).lower().endswith(".onnx"):
        return [("ONNX Runtime", onnxruntime_timer, (str(model["file"]), dict(inputs), threads, dict(want)))]
    return []


def _latencies(timers: Mapping[str, Timer]) -> dict[str, Stats]:
    """Every timer's samples, taken in turn round after round (``interleave.remeasure``)."""
    return {k: r.stats for k, r in remeasure(timers, ROUNDS, settle_s=SETTLE_S).items()}


def _timed(ours: Timer, specs: Sequence[Spec], say: Callable[[str], None]) -> tuple[Stats, list[Contender]]:
    """Ours' latency and the frameworks' contenders: each framework made, checked and sampled in a
    sidecar process (a new one after a framework ended the last), its samples interleaved with
    ours'; one that fails is named with why; every sidecar is closed before this returns or raises."""
    if not specs:
        say("timing the network")
        return _latencies({OURS: ours})[OURS], []
    made: dict[str, _Remote] = {}
    failed: dict[str, str] = {}
    sidecars: list[Sidecar] = []
    ended = False  # the last sidecar's process is gone: the next framework gets a new one
    try:
        for name, make, args in specs:
            say(f"making {name} in a process of its own, checking it against the reference")
            try:
                if ended or not sidecars:
                    sidecars.append(Sidecar())
                    ended = False
                timer = sidecars[-1].timer(make, *args)
                if timer is None:
                    raise BuildError("its maker made no timer")
                made[name] = _Remote(timer)
            except Exception as e:  # noqa: BLE001 - a framework that cannot run is named, the others still run
                failed[name] = _failure(e)
                ended = isinstance(e, _ENDED)
        say("timing the network" + "".join(f", {name}" for name in made) + (" in turn" if made else ""))
        stats = _latencies({OURS: ours, **made})
    finally:
        for sidecar in sidecars:
            sidecar.close()
    return stats[OURS], [_contender(name, made.get(name), stats.get(name), failed.get(name, ""))
                         for name, *_ in specs]


def _contender(name: str, remote: _Remote | None, stats: Stats | None, failed: str) -> Contender:
    if remote is None or remote.failed:
        return Contender(name, None, note=remote.failed if remote else failed)
    err = label_error(getattr(remote.timer, "label", ""))
    note = f"its outputs differ from the reference by {err:.1e}" if err is not None and err >= FRAMEWORK_RTOL else ""
    return Contender(name, stats, err, note)


def time_network(state: State, seed: int = 0, say: Callable[[str], None] | None = None,
                 frameworks: bool = True) -> NetworkTime:
    """Build ``state``'s scheduled program as one network (``relaxnet.build_network``), check it
    against the reference on seeded random inputs, then time it, its kernels in the network and
    (``frameworks``) the frameworks that run the model (module docstring). Raises ``BuildError``
    when it does not build or its outputs differ from the reference (then nothing is timed)."""
    say = say or (lambda _: None)
    graph, target = state.graph, state.session.target
    values = graph.random_inputs(seed)
    say("building the network (one Relax VM module)")
    prog = state.scheduled_program()
    net = build_network(prog, values, target)
    say("checking it against the reference")
    reference = graph.reference(values)
    want = {t: reference[t] for t in graph.outputs}
    err = relative_error(list(net.run(values).values()), want)
    if err >= RTOL:
        raise BuildError(f"the network's outputs differ from the reference by {err:.1e} (relative): not timed")
    main, args = net.vm()["main"], net.args(values)
    specs = _framework_specs(state.session.model, {t: values[t] for t in graph.inputs}, want,
                             target_cores(target)) if frameworks else []
    latency, others = _timed(call_timer(lambda: main(*args), SAMPLE_MS), specs, say)
    say("timing its kernels in the network")
    by_name = {k.name: k for k in prog.plan.kernels}
    order, times, runs = _traced(net.vm(), args, set(by_name))
    spans, start = [], 0.0
    for name in order:
        stats = Stats.of(times[name])
        spans.append(KernelSpan(name, _op_type(state, by_name[name]), tuple(by_name[name].ops), start, stats))
        start += stats.median_ms
    return NetworkTime(zoo.model_label(state.session.model), tuple(spans), runs,
                       (Contender(OURS, latency, err), *others))
