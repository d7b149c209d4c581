"""A tuning result against its baselines, timed as the single-operator benchmark times them.

Each tuned kernel runs beside the same kernel on the starting session's schedule, on its expert
schedule (on the starting layouts), and the faster of PyTorch and NumPy (GMM only) running its
complex op, all interleaved (``interleave.remeasure``; the libraries in ``library.Sidecar``).
A speed-up is a baseline's median over the tuned kernel's; every figure carries its relative
spread ((max - min) / median), and two figures whose samples overlap are *within noise*
(``timing.compare``). The library runs the op alone: the element-wise ops fused into the kernel
(bias, ReLU, ...) are not in its figure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from ...base.errors import WorkbenchError
from ...ir.graph import Graph
from ...ir.ops import per_dim
from ...session.session import Session, State, replay
from ...base.timing import Stats, compare

__all__ = ["BASELINES", "OpWorkload", "KernelBaselines", "BaselinesReport", "op_workload", "tuned_kernels",
           "expert_kernels", "measure_baselines", "speedup_rows", "total", "report_json", "read_report"]

#: the baselines, in the order a table shows them
BASELINES = {"start": "starting schedule", "expert": "expert schedule", "library": "library"}
#: the libraries a kernel's op is held against (torch.compile is left out: it compiles for minutes)
_LIBRARIES = ("torch", "numpy")
#: the longest wait for a quiet machine before each sample (the benchmarks wait up to 2 s)
SETTLE_S = 0.5


@dataclass(frozen=True)
class OpWorkload:
    """A complex op as ``library`` times it: PyTorch's op name, the operands' shapes, its keywords."""

    op: str
    input: tuple[int, ...]
    weight: tuple[int, ...]
    attrs: dict = field(default_factory=dict)


def op_workload(graph: Graph, op: str) -> OpWorkload | None:
    """The library call of a complex op (None for another op).

    >>> from workbench.engine.models import zoo
    >>> w = op_workload(zoo.load("r18_stem"), "conv")  # its padding is an op of its own
    >>> w.op, w.input, w.weight, w.attrs["stride"], w.attrs["padding"]
    ('conv2d', (1, 3, 230, 230), (64, 3, 7, 7), (2, 2), (0, 0))
    """
    node = graph.node(op)
    if node.kind != "complex":
        return None
    x, w = (tuple(graph.tensors[i].shape) for i in node.inputs[:2])
    a = node.kwargs
    if node.type == "matmul":  # a transposed B is the same product: NumPy and torch take it as (K, N)
        return OpWorkload("matmul", x, (*w[:-2], w[-1], w[-2]) if a.get("transpose_b") else w)
    nd = len(x) - 2
    attrs: dict[str, Any] = {"stride": per_dim(a, "stride", nd, 1), "padding": per_dim(a, "padding", nd, 0),
                             "dilation": per_dim(a, "dilation", nd, 1), "groups": int(a.get("groups", 1))}
    if node.type.startswith("conv_transpose"):
        attrs["output_padding"] = per_dim(a, "output_padding", nd, 0)
    return OpWorkload(node.type, x, w, attrs)


@dataclass(frozen=True)
class KernelBaselines:
    """One tuned kernel's timing and its baselines' (by ``BASELINES`` key), the library that ran
    (``library``: e.g. "PyTorch (channels-last)") and why a baseline is missing (``missing``)."""

    kernel: str
    tuned: Stats
    baselines: Mapping[str, Stats] = field(default_factory=dict)
    library: str = ""
    missing: Mapping[str, str] = field(default_factory=dict)

    def speedup(self, name: str) -> float | None:
        """Baseline ``name``'s median over the tuned kernel's (above 1: the tuned kernel is faster)."""
        base = self.baselines.get(name)
        return base.median_ms / self.tuned.median_ms if base and self.tuned.median_ms > 0 else None

    def text(self, name: str) -> str:
        """The speed-up against baseline ``name`` with that baseline's spread, or why it is missing.

        >>> k = KernelBaselines("conv", Stats(1.0, 0.98, 1.02, 5), {"start": Stats(2.0, 1.9, 2.1, 5),
        ...                     "expert": Stats(1.01, 0.99, 1.05, 5)}, missing={"library": "not installed"})
        >>> k.text("start"), k.text("expert"), k.text("library")
        ('2.00x (spread 10%)', '1.01x, within noise (spread 6%)', 'not timed: not installed')
        """
        base = self.baselines.get(name)
        if base is None:
            return f"not timed: {self.missing.get(name, 'no such baseline')}"
        verdict = compare(self.tuned, base)
        noise = ", within noise" if verdict == "within noise" else ""
        return f"{self.speedup(name):.2f}x{noise} (spread {base.relative_spread:.0%})"

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "tuned": asdict(self.tuned),
                "baselines": {k: asdict(v) for k, v in self.baselines.items()}, "library": self.library,
                "missing": dict(self.missing)}

    @staticmethod
    def from_json(d: Mapping) -> KernelBaselines:
        return KernelBaselines(str(d["kernel"]), Stats(**d["tuned"]),
                               {k: Stats(**v) for k, v in d.get("baselines", {}).items()},
                               str(d.get("library", "")), dict(d.get("missing", {})))


def total(kernels: Sequence[KernelBaselines]) -> KernelBaselines | None:
    """The kernels together (their medians, minima and maxima summed), against the baselines
    that every kernel has; None for no kernel.

    >>> one = KernelBaselines("a", Stats(1.0, 0.9, 1.1, 5), {"start": Stats(3.0, 2.9, 3.1, 5)})
    >>> two = KernelBaselines("b", Stats(2.0, 1.9, 2.1, 5), {"start": Stats(3.0, 2.9, 3.1, 5)})
    >>> t = total([one, two]); t.tuned, t.text("start")
    (Stats(median_ms=3.0, min_ms=2.8, max_ms=3.2, repeats=5, rounds=1), '2.00x (spread 7%)')
    """
    if not kernels:
        return None

    def summed(stats: list[Stats]) -> Stats:
        return Stats(sum(s.median_ms for s in stats), sum(s.min_ms for s in stats), sum(s.max_ms for s in stats),
                     min(s.repeats for s in stats))

    common = [n for n in BASELINES if all(n in k.baselines for k in kernels)]
    return KernelBaselines("all tuned kernels", summed([k.tuned for k in kernels]),
                           {n: summed([k.baselines[n] for k in kernels]) for n in common},
                           missing={n: "not for every kernel" for n in BASELINES if n not in common})


def speedup_rows(kernels: Sequence[KernelBaselines]) -> list[dict[str, Any]]:
    """A table: per kernel (then their total), the tuned kernel's median and spread and its
    speed-up against each baseline (the library column names the library that ran)."""
    rows = []
    for k in [*kernels, *([t] if len(kernels) > 1 and (t := total(kernels)) else [])]:
        row: dict[str, Any] = {"kernel": k.kernel, "tuned ms": k.tuned.median_ms,
                               "spread": f"{k.tuned.relative_spread:.0%}"}
        for name, label in BASELINES.items():
            row[f"vs {label}"] = k.text(name) + (f" ({k.library})" if name == "library" and k.library else "")
        rows.append(row)
    return rows


def tuned_kernels(start: State, tuned: State) -> list[str]:
    """The kernels that the steps ``tuned`` adds to ``start`` give a tuned schedule, in order."""
    out: list[str] = []
    for step in tuned.session.steps[len(start.session.steps):]:
        if step.kind == "tuned" and (k := tuned.home_kernel(step.target)) not in out \
                and tuned.kernel_schedule(k).kind == "tuned":
            out.append(k)
    return out


def expert_kernels(start: State, kernels: Sequence[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Each of ``kernels`` on its expert schedule under ``start``'s layouts, as the schedule policy
    gives it (``policy.expert_schedule``: the register-blocked template for a complex op, the
    analytic ones for a pool, a softmax, a conversion), and why a kernel has none."""
    from ...schedules.policy import expert_schedule

    funcs, why = {}, {}
    for k in kernels:
        if k not in start.program.funcs:
            why[k] = "the starting layouts fuse this kernel otherwise"
            continue
        try:
            funcs[k] = expert_schedule(start.program, k, start.session.target).apply(start.program.funcs[k]).mod["main"]
        except Exception as e:  # noqa: BLE001 - TVM's own errors too: the kernel is timed without this baseline
            why[k] = f"no expert schedule: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    return funcs, why


def measure_baselines(start: State, tuned: State, kernels: Sequence[str] | None = None, rounds: int = 3,
                      settle_s: float = SETTLE_S) -> list[KernelBaselines]:
    """Time each of ``kernels`` (default ``tuned_kernels``) of ``tuned`` against its baselines,
    interleaved, ``rounds`` rounds (a noisy contender one set more); every kernel runs on the
    buffers a run of its program on the graph's random inputs leaves."""
    from ...base.interleave import remeasure
    from ...build.targets import target_cores
    from ...measure.kernel_time import kernel_timer
    from ...measure.library import Sidecar, fastest, library_timers

    kernels = list(tuned_kernels(start, tuned) if kernels is None else kernels)
    if not kernels:
        return []
    target, values = tuned.session.target, tuned.graph.random_inputs(0)
    missing: dict[str, dict[str, str]] = {k: {} for k in kernels}
    expert, why = expert_kernels(start, kernels)
    for k, reason in why.items():
        missing[k]["expert"] = reason
        if k not in start.program.funcs:
            missing[k]["start"] = reason
    built = {"tuned": tuned.scheduled_program().build(target), "start": start.scheduled_program().build(target)}
    if expert:
        built["expert"] = start.scheduled_program().with_funcs(expert).build(target)
    out = []
    with Sidecar() as sidecar:
        for k in kernels:
            timers = {name: kernel_timer(b, k, values) for name, b in built.items()
                      if name == "tuned" or name not in missing[k] and (name != "expert" or k in expert)}
            ops = next(x.ops for x in tuned.program.plan.kernels if x.name == k)
            work = op_workload(tuned.graph, ops[0]) if ops else None  # a stand-alone conversion has no op
            libs, why = library_timers(sidecar, work, target_cores(target), _LIBRARIES) if work else ({}, {})
            got = remeasure({**timers, **libs}, rounds, settle_s=settle_s)
            lib_ms, lib_label = fastest({n: got[n].median_ms for n in libs},
                                        {n: str(getattr(t, "label", "")) for n, t in libs.items()})
            stats = {n: got[n].stats for n in timers if n != "tuned"}
            if lib_ms is not None:
                stats["library"] = next(got[n].stats for n in libs if got[n].median_ms == lib_ms)
            else:
                missing[k]["library"] = "; ".join(why.values()) or "no library runs this op alone"
            out.append(KernelBaselines(k, got["tuned"].stats, stats, lib_label, missing[k]))
    return out


########## In a job's result ##########

@dataclass(frozen=True)
class BaselinesReport:
    """What a job wrote of its baselines: the kernels timed, or the error that stopped it."""

    kernels: tuple[KernelBaselines, ...] = ()
    error: str = ""


def report_json(start: Session | State, tuned: Session | State) -> dict:
    """``measure_baselines`` of ``tuned`` (a tuning's result) against ``start`` (the session it
    started from), as the keys a job's result takes: ``baselines``, or ``baselines_error``. A
    session is replayed here (its failure is the report's error); a state is used as it is."""
    try:
        states = [s if isinstance(s, State) else replay(s) for s in (start, tuned)]
        return {"baselines": [k.to_json() for k in measure_baselines(*states)]}
    except Exception as e:  # noqa: BLE001 - the tuning's result stands without its baselines
        return {"baselines_error": str(e) if isinstance(e, WorkbenchError) else f"{type(e).__name__}: {e}"}


def read_report(result: Any, sub_result: Any, started: float) -> BaselinesReport | None:
    """The baselines of a tuning job's ``result`` (its result.json), else of ``sub_result`` (a
    baselines job's, when it timed the run that started at ``started``); None when not timed.

    >>> read_report({"session": {}}, {"started": 5.0, "baselines_error": "no memory"}, 5.0)
    BaselinesReport(kernels=(), error='no memory')
    >>> read_report({"session": {}}, {"started": 4.0, "baselines": []}, 5.0) is None
    True
    """
    for data in (result, sub_result if isinstance(sub_result, dict) and sub_result.get("started") == started
                 else None):
        if isinstance(data, dict) and ("baselines" in data or "baselines_error" in data):
            return BaselinesReport(tuple(KernelBaselines.from_json(k) for k in data.get("baselines", [])),
                                   str(data.get("baselines_error", "")))
    return None
