"""The benchmark behind ``python -m workbench bench``: for each single-operator workload of a
suite, in one run on one machine, (a) MetaSchedule as TVM ships it (``TVM_DEFAULTS``: no seed,
XGBoost random for its first 100 measurements, 512 schedules a generation, 64 a batch), loop-only
on the default layout at a budget of B measurements, (a') the workbench's own loop-only stage on the
default layout at the same budget: MetaSchedule seeded by the op's expert schedule, with our cost-model
warm-up and population (what the layouts alone add is the joint tuner's lead over it),
(b) the joint layout+loop tuner at the same total budget B,
(c) PyTorch on the CPU (best of NCHW and channels-last), (d) NumPy for GMM, (e) the op's expert
schedule on the default layout, alone (the seed the joint tuner and (a') start from). Every kernel is checked
against the reference before its time is reported; ``pct_peak`` is the joint kernel's useful
FLOP rate against the machine's measured FMA peak (``ceilings``), ``loop_only_pct_peak`` the
loop-only kernel's (the room a layout has: at 80% of peak no layout can make the op 1.25x faster).

The names moved: round 1's ``metaschedule_ms`` was MetaSchedule unseeded (TVM's cost-model
warm-up and population, batches of 8); from ``6af8529`` (tuning starts from the expert schedules)
the same name held the seeded run, (a') here, and from ``7f0d79d`` the unseeded one came back as
``tvm_metaschedule_ms``. Now (a) is ``metaschedule_ms`` and (a') ``loop_only_ms``; an ``--out``
folder of an older run is refused (its databases and progress lines would resume under the other
meaning).

The tuners' figures come from an hour of tuning while the baselines take seconds: a busy moment
of a shared machine would favour one or the other. So after tuning, the best kernel of each
tuner and every baseline are measured again, interleaved (``interleave.remeasure``: A B C D,
A B C D, ... for ``rounds`` rounds, a noisy contender once more, then flagged in ``noisy``).
``metaschedule_ms``, ``loop_only_ms``, ``joint_ms``, ``torch_ms`` and ``numpy_ms`` are those medians, with their
relative spreads ((max - min) / median) beside them; ``*_tuning_ms`` keep the tuners' own figures.

Ratios above 1 mean the joint tuner is faster: ``joint_vs_metaschedule = (a)/(b)``,
``joint_vs_loop_only = (a')/(b)``, ``joint_vs_torch = (c)/(b)``, all from the re-measured
medians; ``joint_with_conversions_vs_*`` count the joint layout's conversions, which a single op
pays. Every kernel, MetaSchedule's included, is built by the workbench's code generation.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from types import MappingProxyType
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import psutil
import tvm

from .graph import Graph, GraphBuilder
from .interleave import ROUNDS, Remeasured, Timer, interleaved_samples, remeasure, steal_pct
from .book import LayoutBook
from .keys import apply_actions
from .program import Built, make_program
from .ceilings import get_ceilings
from .conversions import conversion_bytes
from .targets import cpu_name, target_cores
from .errors import TuneError
from .timing import NOISE
from .tuning.joint import joint_tune
from .tuning.loop import tune_loops
from .tuning.options import TuneOptions
from .tuning.progress import read_progress
from .tuning.records import TuneTask

__all__ = ["Workload", "BenchRow", "Sidecar", "TVM_DEFAULTS", "load_suite", "workload_graph", "run_bench",
           "write_results", "machine_name"]

#: the contenders measured again after tuning, in their interleaving order (``joint_conversions``:
#: the joint layout's conversion kernels, timed here too: timed right after tuning, in its
#: process, the first kernel ran up to 4x slower, e.g. the stem's unfold 0.12 ms instead of 0.03)
CONTENDERS = ("metaschedule", "loop_only", "joint", "joint_conversions", "expert", "torch", "numpy")
#: MetaSchedule's own search defaults (``ms.tune_tir``): no seed, XGBoost scores at random until it
#: holds 100 measurements (at budget 128 in batches of 64: every batch), 512 schedules a
#: generation, 4 generations. What stays the workbench's: candidates built by its code generation
#: and timed in this process by ``tuning.runner`` (3 repeats of 20 ms, TVM's 1 of 100 ms x 3),
#: seed 0
TVM_DEFAULTS: Mapping[str, Any] = MappingProxyType(dict(expert_seed=False, warmup_samples=100, population_size=512,
                                                        genetic_num_iters=4, num_trials_per_iter=64))
#: one timing sample lasts about this long (the call repeated as often as it takes)
SAMPLE_MS = 50.0
#: results.csv's columns (README and hooks read ``joint_vs_*``) and results.md's titles
TITLES = {"workload": "workload", "op": "op", "budget": "budget",
          "metaschedule_ms": "MetaSchedule ms", "loop_only_ms": "loop-only (seeded) ms",
          "joint_ms": "joint ms", "joint_layout": "joint layout", "joint_conversions_ms": "conversions ms",
          "torch_ms": "PyTorch ms", "numpy_ms": "NumPy ms", "joint_vs_metaschedule": "joint vs MetaSchedule",
          "joint_with_conversions_vs_metaschedule": "joint+conversions vs MetaSchedule",
          "joint_vs_loop_only": "joint vs loop-only",
          "joint_with_conversions_vs_loop_only": "joint+conversions vs loop-only",
          "joint_vs_torch": "joint vs PyTorch", "expert_ms": "expert ms (no search)",
          "expert_vs_torch": "expert vs PyTorch", "pct_peak": "joint % of peak",
          "loop_only_pct_peak": "loop-only % of peak",
          "joint_s_per_measurement": "joint s / measurement",
          "joint_conversions_gbs": "conversions GB/s", "joint_conversions_pct_copy": "conversions % of copy",
          "metaschedule_tuning_ms": "MetaSchedule ms (tuning)", "loop_only_tuning_ms": "loop-only ms (tuning)",
          "joint_tuning_ms": "joint ms (tuning)", "metaschedule_spread": "MetaSchedule spread",
          "loop_only_spread": "loop-only spread",
          "joint_spread": "joint spread", "joint_conversions_spread": "conversions spread",
          "expert_spread": "expert spread", "torch_spread": "PyTorch spread",
          "numpy_spread": "NumPy spread",
          "rounds": "rounds", "noisy": "noisy", "steal_pct": "steal %", "verified": "verified", "date": "date",
          "machine": "machine"}
COLUMNS = list(TITLES)


@dataclass(frozen=True)
class Workload:
    name: str
    op: str
    input: tuple[int, ...]
    weight: tuple[int, ...]
    attrs: dict
    source: str = ""


@dataclass
class BenchRow:
    workload: str
    op: str
    budget: int
    metaschedule_ms: float | None  # MetaSchedule with TVM's defaults, unseeded (None: not run)
    joint_ms: float | None
    joint_layout: str
    joint_conversions_ms: float | None
    torch_ms: float | None
    numpy_ms: float | None
    verified: bool
    date: str
    machine: str
    metaschedule_tuning_ms: float | None = None
    joint_tuning_ms: float | None = None
    metaschedule_spread: float | None = None  # relative: (max - min) / median of the re-measure
    joint_spread: float | None = None
    torch_spread: float | None = None
    numpy_spread: float | None = None
    rounds: int = 0  # interleaved rounds per set
    noisy: str = ""  # the contenders whose spread stayed above the threshold, comma-separated
    expert_ms: float | None = None  # the default layout's expert schedule alone (the seeded tuners' seed)
    expert_spread: float | None = None
    flops: int = 0  # the op's useful FLOPs
    peak_gflops: float | None = None  # the machine's measured FMA peak (ceilings)
    joint_s_per_measurement: float | None = None  # the joint tuner's wall time / its measurements
    joint_conversions_gbs: float | None = None  # their bytes / their time (None: no conversion)
    joint_conversions_pct_copy: float | None = None  # that rate against the machine's STREAM copy
    steal_pct: float | None = None  # the CPU time the hypervisor took during the re-measurement, percent
    loop_only_ms: float | None = None  # our loop-only stage: MetaSchedule seeded by the expert (None: not run)
    loop_only_spread: float | None = None
    loop_only_tuning_ms: float | None = None
    joint_conversions_spread: float | None = None

    def _pct_peak(self, ms: float | None) -> float | None:
        if not (ms and self.flops and self.peak_gflops):
            return None
        return 100.0 * self.flops / (ms * 1e6) / self.peak_gflops

    @property
    def pct_peak(self) -> float | None:
        """The joint kernel's useful FLOP rate as a percentage of the measured FMA peak."""
        return self._pct_peak(self.joint_ms)

    @property
    def loop_only_pct_peak(self) -> float | None:
        """The loop-only kernel's: 100 / this bounds what any layout can gain over it."""
        return self._pct_peak(self.loop_only_ms)

    @property
    def expert_vs_torch(self) -> float | None:
        return _ratio(self.torch_ms, self.expert_ms)

    def _with_conversions(self) -> float | None:
        """The joint kernel's time with its layout's conversions (a single op pays them)."""
        if self.joint_ms is None or self.joint_conversions_ms is None:
            return None
        return self.joint_ms + self.joint_conversions_ms

    @property
    def joint_vs_metaschedule(self) -> float | None:
        return _ratio(self.metaschedule_ms, self.joint_ms)

    @property
    def joint_with_conversions_vs_metaschedule(self) -> float | None:
        """As ``joint_vs_metaschedule``, the joint layout paying its conversions (a single op must)."""
        return _ratio(self.metaschedule_ms, self._with_conversions())

    @property
    def joint_vs_loop_only(self) -> float | None:
        return _ratio(self.loop_only_ms, self.joint_ms)

    @property
    def joint_with_conversions_vs_loop_only(self) -> float | None:
        return _ratio(self.loop_only_ms, self._with_conversions())

    @property
    def joint_vs_torch(self) -> float | None:
        return _ratio(self.torch_ms, self.joint_ms)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for name in RATIOS + ("pct_peak", "loop_only_pct_peak"):
            d[name] = getattr(self, name)
        return {k: d[k] for k in COLUMNS}


#: the ratios a row derives (results.md's footer gives their geometric means)
RATIOS = ("joint_vs_metaschedule", "joint_with_conversions_vs_metaschedule", "joint_vs_loop_only",
          "joint_with_conversions_vs_loop_only", "joint_vs_torch", "expert_vs_torch")


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def load_suite(path: str | os.PathLike) -> list[Workload]:
    d = json.loads(Path(path).read_text())
    return [Workload(w["name"], w["op"], tuple(w["input"]), tuple(w["weight"]), dict(w.get("attrs", {})),
                     w.get("source", "")) for w in d["workloads"]]


def workload_graph(w: Workload) -> tuple[Graph, str]:
    """A one-op graph for the workload, and the op's name."""
    b = GraphBuilder(w.name)
    if w.op == "matmul":
        x = b.input("a", w.input, "MK")
        op = "gmm"
        b.op(op, "matmul", x, b.const(f"{op}.weight", w.weight, "KN"), **w.attrs)
    else:
        nd = len(w.input) - 2
        x = b.input("data", w.input, "NC" + "DHW"[3 - nd:])
        op = "tconv" if w.op.startswith("conv_transpose") else "conv"
        wd = ("IO" if op == "tconv" else "OI") + "DHW"[3 - nd:]
        b.op(op, w.op, x, b.const(f"{op}.weight", w.weight, wd), **w.attrs)
    return b.build(), op


def machine_name() -> str:
    """The CPU's name and core count, for the results' heading."""
    return f"{cpu_name()}, {os.cpu_count()} cores"


def call_timer(fn: Callable[[], Any], min_ms: float = SAMPLE_MS) -> Timer:
    """A timer of ``fn``: each sample (ms per call) repeats it for about ``min_ms``, the count
    fixed once after a warm-up call."""
    fn()
    t0 = time.perf_counter()
    fn()
    number = max(1, int(min_ms / 1e3 / max(time.perf_counter() - t0, 1e-6)))

    def sample() -> float:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - t0) / number * 1e3

    return sample


def torch_timer(w: Workload, threads: int) -> Timer:
    """PyTorch on the CPU, in the faster of the default (NCHW) and channels-last memory formats
    (chosen by the median of three samples each, interleaved, each once the machine is quiet:
    chosen right after our kernels ran, while TVM's pool still spun, one format's samples could
    come out slow: ``grp_resnext`` measured 2.9 ms in one run, 0.44 ms in another)."""
    import torch

    torch.set_num_threads(threads)
    x, wt = torch.rand(w.input), torch.rand(w.weight)  # no requires_grad: autograd records nothing
    if w.op == "matmul":
        return call_timer(lambda: x @ wt)
    fn = getattr(torch.nn.functional, w.op)
    attrs = {k: v for k, v in w.attrs.items() if k != "depthwise"}
    formats = [torch.contiguous_format] + ([torch.channels_last] if x.dim() == 4 else
                                           [torch.channels_last_3d] if x.dim() == 5 else [])
    timers = []
    for fmt in formats:
        xf, wf = x.contiguous(memory_format=fmt), wt.contiguous(memory_format=fmt)
        timers.append(call_timer(lambda xf=xf, wf=wf: fn(xf, wf, **attrs)))
    samples = interleaved_samples(dict(enumerate(timers)), rounds=3)
    return timers[min(samples, key=lambda i: float(np.median(samples[i])))]


def numpy_timer(w: Workload) -> Timer | None:
    """NumPy's ``@`` for a GMM; None for other ops."""
    if w.op != "matmul":
        return None
    a, b = np.random.rand(*w.input).astype("float32"), np.random.rand(*w.weight).astype("float32")
    return call_timer(lambda: a @ b)


def _sidecar_main(conn: Any) -> None:
    """The sidecar's loop: make timers, answer samples (an error is sent back as a string)."""
    timers: dict[str, Timer | None] = {}
    while True:
        msg = conn.recv()
        try:
            if msg[0] == "make":
                _, key, make, args = msg
                timers[key] = make(*args)
                conn.send(timers[key] is not None)
            elif msg[0] == "sample":
                conn.send(float(timers[msg[1]]()))
            else:
                return
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
            conn.send(f"{type(e).__name__}: {e}")


class Sidecar:
    """PyTorch and NumPy timed in a process of their own, started before this process runs any
    TVM kernel or tuning: in the bench's process, after MetaSchedule had tuned (thread pools of
    TVM, XGBoost and PyTorch on 2 cores), PyTorch's calls took a steady 10-20 ms more each
    (a 1.7 ms convolution measured 14.8 ms). The parent still interleaves: each sample is one
    request to the sidecar, taken in its turn."""

    def __init__(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_sidecar_main, args=(child,), daemon=True)
        self._proc.start()
        self._n = 0

    def _ask(self, msg: tuple) -> Any:
        self._conn.send(msg)
        got = self._conn.recv()
        if isinstance(got, str):
            raise RuntimeError(f"the timing sidecar failed: {got}")
        return got

    def timer(self, make: Callable[..., Timer | None], *args: Any) -> Timer | None:
        """The timer ``make(*args)`` returns, made and sampled in the sidecar (``make``: a
        module-level function, so that it pickles); None when it returns None."""
        self._n += 1
        key = f"t{self._n}"
        if not self._ask(("make", key, make, args)):
            return None
        return lambda: self._ask(("sample", key))

    def close(self) -> None:
        try:
            self._conn.send(("stop",))
        except OSError:
            pass
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()

    def __enter__(self) -> "Sidecar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def kernel_timer(built: Built, op: str, values: dict[str, np.ndarray], min_ms: float = SAMPLE_MS) -> Timer:
    """The kernel ``op`` of a built program alone, on the buffers a run on ``values`` leaves,
    timed by TVM's evaluator as the tuners time it."""
    kernel = next(k for k in built.program.plan.kernels if k.name == op)
    bufs = {name: tvm.runtime.tensor(a) for name, a in built.run_buffers(values).items()}
    args = [bufs[b] for b in kernel.inputs + kernel.outputs]
    one = call_timer(lambda: built.rt[op](*args), min_ms=0.0)()  # warm-up, and one call's time
    ev = built.rt.time_evaluator(op, tvm.cpu(), number=max(1, int(min_ms / max(one, 1e-6))), repeat=1)
    return lambda: float(ev(*args).results[0]) * 1e3


def conversions_timer(built: Built, values: dict[str, np.ndarray], min_ms: float = SAMPLE_MS) -> Timer | None:
    """The program's stand-alone conversion kernels, each timed as ``kernel_timer`` times a
    kernel, their times added (None: the program converts nothing)."""
    names = [k.name for k in built.program.plan.kernels if k.conversion is not None]
    timers = [kernel_timer(built, name, values, min_ms / max(len(names), 1)) for name in names]
    return (lambda: sum(t() for t in timers)) if timers else None


def _tuned(graph: Graph, book: LayoutBook, op: str, trace: Any, target: dict) -> tuple[Built, bool]:
    """Build the whole program as a session would: the tuned kernel (``trace``; None: the op's
    expert schedule) and each conversion with its analytic schedule, and check it."""
    from .expert import expert_steps
    from .expert.convert import scheduled_conversions
    from .loops import apply_steps, apply_trace_json

    prog = make_program(graph, book)
    func = prog.funcs[op]
    sch = apply_steps(func, expert_steps(func, op, target)) if trace is None else apply_trace_json(func, trace)
    prog = prog.with_funcs({**scheduled_conversions(prog, target), op: sch.mod["main"]})
    built = prog.build(target)
    return built, built.verify().ok


def _remeasured_fields(got: Mapping[str, Remeasured], rounds: int) -> dict[str, Any]:
    """The row's re-measured figures: median and spread per contender, and the noisy ones."""
    out: dict[str, Any] = {"rounds": rounds, "noisy": ", ".join(n for n in CONTENDERS if n in got and got[n].noisy)}
    for name in CONTENDERS:
        r = got.get(name)
        out[f"{name}_ms"], out[f"{name}_spread"] = (r.median_ms, r.relative_spread) if r else (None, None)
    return out


def run_bench(suite: list[Workload], budget: int, out_dir: Path, target: dict, *, search: str = "model",
              seed: int = 0, rounds: int = ROUNDS, on_step: Callable[[str], None] | None = None) -> list[BenchRow]:
    """Run every workload: tune with each tuner (both MetaSchedules, the joint tuner), then
    re-measure their best kernels and the baselines interleaved (``rounds`` rounds). Progress lines go to
    ``out_dir/progress/<workload>_<tuner>.jsonl``."""
    out_dir = Path(out_dir)
    if old := sorted((out_dir / "progress").glob("*_tvm-metaschedule.jsonl")):
        raise TuneError(f"{out_dir} holds a benchmark run from before the columns were renamed ({old[0].name}): "
                        "its 'metaschedule' databases are the seeded run's; give --out a new folder")
    (out_dir / "progress").mkdir(parents=True, exist_ok=True)
    say = on_step or (lambda s: None)
    with Sidecar() as sidecar:
        return _run_bench(suite, budget, out_dir, target, search, seed, rounds, say, sidecar)


def _run_bench(suite: list[Workload], budget: int, out_dir: Path, target: dict, search: str, seed: int, rounds: int,
               say: Callable[[str], None], sidecar: Sidecar) -> list[BenchRow]:
    rows = []
    date, machine = _dt.date.today().isoformat(), machine_name()
    threads = target_cores(target)
    say("this machine's FMA peak and bandwidth (cached per CPU)")
    ceilings = get_ceilings(target)
    for w in suite:
        graph, op = workload_graph(w)
        values = graph.random_inputs()
        timers: dict[str, Timer] = {}
        tuned = _tune_all(w, graph, op, budget, out_dir, target, search, seed, ceilings, values, timers, say) \
            if budget > 0 else {"verified": True}
        built_e, ok_e = _tuned(graph, LayoutBook(), op, None, target)
        timers["expert"] = kernel_timer(built_e, op, values)
        timers["torch"] = sidecar.timer(torch_timer, w, threads)
        if (np_timer := sidecar.timer(numpy_timer, w)) is not None:
            timers["numpy"] = np_timer
        say(f"{w.name}: {', '.join(timers)} again, interleaved, {rounds} rounds")
        before = psutil.cpu_times()
        got = remeasure(timers, rounds)
        steal = steal_pct(before, psutil.cpu_times())
        fields = _remeasured_fields(got, rounds)
        moved = tuned.pop("joint_conversion_bytes", 0)
        if budget > 0 and "joint_conversions" not in timers:
            fields["joint_conversions_ms"] = 0.0  # the joint layout converts nothing
        if moved and fields["joint_conversions_ms"]:
            gbs = moved / (fields["joint_conversions_ms"] * 1e6)
            fields.update(joint_conversions_gbs=gbs, joint_conversions_pct_copy=100 * gbs / ceilings.copy_gbs)
        rows.append(BenchRow(w.name, w.op, budget, **{"joint_layout": "", **tuned,
                                                       "verified": bool(tuned["verified"] and ok_e)},
                             date=date, machine=machine, flops=int(graph.flops(op)), peak_gflops=ceilings.peak_gflops,
                             steal_pct=steal, **fields))
        write_results(rows, out_dir)  # after each workload: a stopped run keeps what it measured
    return rows


def _loop_only(w: Workload, graph: Graph, op: str, budget: int, out_dir: Path, target: dict, seed: int,
               tuner: str, values: dict[str, np.ndarray], timers: dict[str, Timer],
               **options: Any) -> tuple[bool, float | None]:
    """MetaSchedule loop-only on the default layout (``options``: how it differs from our loop-only
    stage); its best kernel's timer goes to ``timers[tuner]``. Returns (verified, its tuning ms)."""
    prog = make_program(graph)
    res = tune_loops([TuneTask(op, prog.funcs[op], prog.flops[op])], target,
                     out_dir / "work" / w.name / tuner, budget,
                     TuneOptions(progress_path=out_dir / "progress" / f"{w.name}_{tuner.replace('_', '-')}.jsonl",
                                 seed=seed, isolated=False, **options), stage="loop")[op]
    if res.best_ms is None:
        return False, None
    built, ok = _tuned(graph, LayoutBook(), op, res.trace, target)
    timers[tuner] = kernel_timer(built, op, values)
    return ok, res.best_ms


def _tune_all(w: Workload, graph: Graph, op: str, budget: int, out_dir: Path, target: dict, search: str, seed: int,
               ceilings: Any, values: dict[str, np.ndarray], timers: dict[str, Timer],
               say: Callable[[str], None]) -> dict[str, Any]:
    """Tune ``op`` loop-only on the default layout (our seeded stage, and MetaSchedule with TVM's
    defaults) and with the joint tuner, add the kernels' timers to ``timers``, and return the row's tuning fields."""
    say(f"{w.name}: loop-only stage (MetaSchedule seeded by the expert), budget {budget}")
    ok_l, loop_tuning = _loop_only(w, graph, op, budget, out_dir, target, seed, "loop_only", values, timers)
    say(f"{w.name}: MetaSchedule (TVM's defaults), budget {budget}")
    ok_m, ms_tuning = _loop_only(w, graph, op, budget, out_dir, target, seed, "metaschedule", values, timers,
                                 **TVM_DEFAULTS)
    say(f"{w.name}: joint layout+loop, budget {budget}")
    started = time.perf_counter()
    jr = joint_tune(graph, LayoutBook(), op, target, out_dir / "work" / w.name / "joint", budget,
                    TuneOptions(progress_path=out_dir / "progress" / f"{w.name}_joint.jsonl", seed=seed, search=search))
    per_measurement = (time.perf_counter() - started) / max(jr.measurements, 1)
    book = apply_actions(graph, LayoutBook(), jr.best.actions(graph, op))
    built_b, ok_b = _tuned(graph, book, op, jr.trace, target)
    timers["joint"] = kernel_timer(built_b, op, values)
    if (conversions := conversions_timer(built_b, values)) is not None:
        timers["joint_conversions"] = conversions
    moved = sum(conversion_bytes(built_b.program, k.name) for k in built_b.program.plan.kernels
                if k.conversion is not None)
    return dict(joint_layout=jr.best.label, joint_conversion_bytes=moved, verified=ok_l and ok_m and ok_b,
                joint_s_per_measurement=per_measurement, loop_only_tuning_ms=loop_tuning,
                metaschedule_tuning_ms=ms_tuning, joint_tuning_ms=jr.best_ms)


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _geomean(vals: list[float | None]) -> float | None:
    vals = [v for v in vals if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def write_tables(out_dir: Path, stem: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]],
                 heading: str, footer: str = "", shown: Sequence[str] | None = None,
                 titles: Mapping[str, str] | None = None) -> tuple[Path, Path]:
    """``STEM.csv`` (every column of ``columns``) and ``STEM.md`` (``heading``, a table of the
    ``shown`` columns under their ``titles``, ``footer``) in ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    with csv_path.open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(columns))
        wr.writeheader()
        wr.writerows({k: _fmt(r.get(k)) for k in columns} for r in rows)
    shown, titles = list(shown or columns), titles or {}
    lines = [heading, "", "| " + " | ".join(titles.get(k, k) for k in shown) + " |", "|" + "---|" * len(shown)]
    lines += ["| " + " | ".join(_fmt(r.get(k)) for k in shown) + " |" for r in rows]
    md_path.write_text("\n".join(lines + (["", footer] if footer else [])) + "\n")
    return csv_path, md_path


def write_results(rows: list[BenchRow], out_dir: Path) -> tuple[Path, Path]:
    """``results.csv`` (one row per workload) and ``results.md`` (table with geometric means)."""
    heading = (f"Machine: {rows[0].machine if rows else machine_name()}; date {rows[0].date if rows else ''}; "
               f"budget {rows[0].budget if rows else ''} measurements per tuner per workload. Times are medians "
               f"of {rows[0].rounds if rows else ROUNDS} interleaved rounds after tuning (spread: (max - min) / "
               f"median; noisy: above {NOISE:.0%} even when measured again); the tuning columns are the tuners' own.")
    gm = {k: _fmt(_geomean([getattr(r, k) for r in rows])) for k in RATIOS}
    footer = (f"Geometric mean, joint vs MetaSchedule (TVM's search defaults, unseeded): "
              f"{gm['joint_vs_metaschedule']}x ({gm['joint_with_conversions_vs_metaschedule']}x with the joint "
              f"layout's conversions); joint vs the loop-only stage (MetaSchedule seeded by the expert schedule, "
              f"default layout: what the layouts add): {gm['joint_vs_loop_only']}x "
              f"({gm['joint_with_conversions_vs_loop_only']}x with the conversions); "
              f"joint vs PyTorch: {gm['joint_vs_torch']}x; expert schedule alone vs PyTorch: "
              f"{gm['expert_vs_torch']}x (above 1: ours is faster).")
    shown = [k for k in COLUMNS if k not in ("date", "machine")]  # those two are in the heading
    return write_tables(out_dir, "results", COLUMNS, [r.as_dict() for r in rows], heading, footer, shown, TITLES)


def curves(out_dir: Path) -> dict[str, dict[str, list[dict]]]:
    """Progress lines per workload and tuner, for the tuning-curve figures."""
    out: dict[str, dict[str, list[dict]]] = {}
    for p in sorted((Path(out_dir) / "progress").glob("*.jsonl")):
        name, _, tuner = p.stem.rpartition("_")
        out.setdefault(name, {})[tuner] = read_progress(p)
    return out


def search_study(suite: list[Workload], joint_budget: int, out_dir: Path, target: dict, *, seeds: tuple[int, ...] = (0, 1),
                 per_candidate: int = 1, on_step: Callable[[str], None] | None = None) -> list[dict]:
    """The joint stage alone (no loop-only stage) with the cost-model-guided search and with
    random sampling, at the same budget and seeds: does the guided search find better layouts?"""
    rows = []
    for w in suite:
        graph, op = workload_graph(w)
        for seed in seeds:
            row: dict[str, Any] = {"workload": w.name, "seed": seed, "budget": joint_budget}
            for search in ("model", "random"):
                if on_step:
                    on_step(f"{w.name} seed {seed}: {search} search")
                jr = joint_tune(graph, LayoutBook(), op, target, Path(out_dir) / "work" / f"{w.name}_{search}_{seed}",
                                joint_budget, TuneOptions(joint_fraction=1.0, per_candidate=per_candidate,
                                                          search=search, seed=seed))
                row[f"{search}_ms"], row[f"{search}_layout"] = jr.best_ms, jr.best.label
            row["model_vs_random"] = _ratio(row["random_ms"], row["model_ms"])
            rows.append(row)
            write_study(rows, out_dir)  # after each run: a stopped study keeps what it measured
    return rows


def write_study(rows: list[dict], out_dir: Path) -> Path:
    """``search.csv`` and ``search.md``: the search study's runs as a table, and the geometric mean
    of random / guided."""
    columns = ["workload", "seed", "budget", "model_ms", "random_ms", "model_vs_random", "model_layout", "random_layout"]
    titles = {"model_ms": "model-guided ms", "random_ms": "random ms", "model_vs_random": "random / guided",
              "model_layout": "guided layout"}
    footer = (f"Geometric mean, random / guided: {_fmt(_geomean([r['model_vs_random'] for r in rows]))}x over "
              f"{len(rows)} runs (above 1: the guided search found faster layouts at the same budget).")
    shown = [c for c in columns if c != "random_layout"]
    return write_tables(out_dir, "search", columns, rows, "The joint stage alone, cost-model-guided vs random "
                        "search at the same budget and seed.", footer, shown, titles)[1]
