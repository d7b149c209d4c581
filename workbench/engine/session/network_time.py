"""The whole network timed as it runs: the compiled network (``relaxnet``: the Relax VM module
``network.so`` holds), its kernels in the order the VM calls them and by op type, conversions
against compute, and the frameworks that run the same model on the same input beside it.

Correctness first: the network's outputs are checked against the reference before anything is
timed, and each framework's outputs against the same reference. The network's latency is timed
plainly; its kernels' times come from the VM's instrument hook (each call between its before and
after), medians over several runs of the whole network, so they include what the network does
to a kernel (a cache another kernel left warm or cold). Frameworks: PyTorch eager and ONNX
Runtime (on the module exported to ONNX) for a built-in network, ONNX Runtime for an imported
ONNX file, none for a model of the op library.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..models import zoo
from ..base.errors import BuildError, first_line
from ..base.interleave import call_timer, wait_for_quiet
from ..build.program import output_errors
from ..build.relaxnet import build_network
from .session import State
from ..build.targets import target_cores
from ..base.timing import Stats, measure_until_quiet

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


def _latency(call: Callable[[], object]) -> Stats:
    wait_for_quiet()  # another pool spinning on would take this one's cores
    timer = call_timer(call, min_ms=20.0)
    return measure_until_quiet(lambda: [timer() for _ in range(5)], max_rounds=2)


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


def _rel_error(got: Sequence[np.ndarray], want: Mapping[str, np.ndarray]) -> float:
    if len(got) != len(want):
        raise BuildError(f"{len(got)} outputs where the model has {len(want)}")
    per = output_errors({t: np.asarray(g, np.float32).reshape(want[t].shape) for t, g in zip(want, got)}, want)
    return max(r for _, r in per.values())


def _framework(name: str, make: Callable[[], Callable[[], Sequence[Any]]], want: Mapping[str, np.ndarray]
               ) -> Contender:
    """A framework's contender: the call ``make`` sets up, its outputs checked against ``want``, then timed."""
    try:
        run = make()
        err = _rel_error([np.asarray(o) for o in run()], want)
        note = "" if err < FRAMEWORK_RTOL else f"its outputs differ from the reference by {err:.1e}"
        return Contender(name, _latency(run), err, note)
    except Exception as e:  # noqa: BLE001 - a framework that cannot run is named, the others still run
        return Contender(name, None, note=f"{type(e).__name__}: {first_line(e)}")


def _frameworks(model: Mapping, inputs: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], threads: int,
                say: Callable[[str], None]) -> list[Contender]:
    """PyTorch and ONNX Runtime on a built-in network, ONNX Runtime on an imported ONNX file."""
    if model.get("zoo") in zoo.NETWORKS:
        import torch

        from ..models import networks

        module, _ = getattr(networks, model["zoo"])(**{k: v for k, v in model.items() if k != "zoo"})
        xs = tuple(torch.from_numpy(np.ascontiguousarray(v)) for v in inputs.values())
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            say("timing PyTorch eager")

            def eager() -> list:
                with torch.no_grad():
                    out = module(*xs)
                return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]

            got = [_framework("PyTorch eager", lambda: eager, want)]
        finally:
            torch.set_num_threads(before)
        with tempfile.TemporaryDirectory() as tmp:
            say("exporting to ONNX, timing ONNX Runtime")
            path = Path(tmp) / "model.onnx"
            got.append(_framework("ONNX Runtime", lambda: _ort(path, inputs, threads, module, xs), want))
        return got
    if "file" in model and str(model["file"]).lower().endswith(".onnx"):
        say("timing ONNX Runtime")
        return [_framework("ONNX Runtime", lambda: _ort(Path(model["file"]), inputs, threads), want)]
    return []


def _ort(path: Path, inputs: Mapping[str, np.ndarray], threads: int, module: Any = None, xs: tuple = ()) -> Callable:
    """ONNX Runtime on ``path`` (exported from ``module`` first when given): a call to time."""
    from ..measure.engines import ort_session

    if module is not None and not path.exists():
        import torch

        with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer notes, expected here
            warnings.simplefilter("ignore")
            torch.onnx.export(module.eval(), xs, str(path), dynamo=False, opset_version=17, input_names=list(inputs))
    sess = ort_session(path, threads)
    feed = {i.name: np.ascontiguousarray(v) for i, v in zip(sess.get_inputs(), inputs.values())}
    return lambda: sess.run(None, feed)


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
    err = _rel_error(list(net.run(values).values()), want)
    if err >= RTOL:
        raise BuildError(f"the network's outputs differ from the reference by {err:.1e} (relative): not timed")
    say("timing the network")
    main, args = net.vm()["main"], net.args(values)
    ours = Contender("ours (compiled network)", _latency(lambda: main(*args)), err)
    say("timing its kernels in the network")
    by_name = {k.name: k for k in prog.plan.kernels}
    order, times, runs = _traced(net.vm(), args, set(by_name))
    spans, start = [], 0.0
    for name in order:
        stats = Stats.of(times[name])
        spans.append(KernelSpan(name, _op_type(state, by_name[name]), tuple(by_name[name].ops), start, stats))
        start += stats.median_ms
    others = _frameworks(state.session.model, {t: values[t] for t in graph.inputs}, want, target_cores(target),
                         say) if frameworks else []
    return NetworkTime(zoo.model_label(state.session.model), tuple(spans), runs, (ours, *others))
