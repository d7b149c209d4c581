"""The single-operator benchmark behind ``python -m workbench bench``.

For each workload of a suite, in one run on one machine: (a) MetaSchedule with TVM's own search
defaults (``TVM_DEFAULTS``), loop-only on the default layout, at a budget of B measurements;
(a') our loop-only stage (MetaSchedule seeded by the op's expert schedule) at the same budget;
(b) the joint layout+loop tuner at the same total budget; (c) the libraries (the fastest is
``library``); (e) the op's expert schedule alone; (f) the machine's FMA kernel, the in-run peak.
Every kernel is built by the workbench's code generation and checked against the reference
before its time is reported.

Tuning takes far longer than timing a baseline, so a busy moment of a shared machine would favour
one side: after tuning, every contender is timed again, interleaved (``interleave.remeasure``);
the ``*_ms`` columns are those medians. What each column means:
benchmarks/README.md, "The suite's columns".
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from dataclasses import dataclass
from types import MappingProxyType
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import tvm

from workbench.engine.ir.graph import Graph, GraphBuilder
from workbench.engine.base.interleave import ROUNDS, Remeasured, Timer, call_timer, remeasure  # noqa: F401 (call_timer: the results scripts import it from here)
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.measure.library import LABELS, LIBRARIES, Sidecar, fastest, library_timers
from workbench.engine.measure.machine import describe, machine_state, steal_pct, write_machine
from workbench.engine.schedules.policy import KernelSchedule, scheduled_funcs
from workbench.engine.build.program import Built, make_program
from workbench.engine.measure.ceilings import copy_bandwidth, peak_call, peak_kernel_shape
from workbench.engine.measure.conversion_rates import conversion_bytes
from workbench.engine.measure.kernel_time import conversions_timer, evaluator_timer, kernel_timer
from .suite_row import BenchRow, COLUMNS, RATIOS, TITLES, ratio
from .tables import fmt, geomean, summary_ratio, write_tables
from workbench.engine.build.targets import cpu_name, target_cores
from workbench.engine.base.errors import TuneError
from workbench.engine.base.timing import NOISE
from workbench.engine.tuning.joint import joint_tune
from workbench.engine.tuning.loop import tune_loops
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.progress import read_progress
from workbench.engine.tuning.records import TuneTask

__all__ = ["Workload", "BenchRow", "Sidecar", "TVM_DEFAULTS", "load_suite", "workload_graph", "run_bench",
           "write_results", "machine_name"]

#: the contenders measured again after tuning, in their interleaving order (``joint_conversions``:
#: the joint layout's conversion kernels, timed here too because right after tuning, in the
#: tuning's process, they run slower; ``peak``: the FMA kernel, whose median rates the others)
CONTENDERS = ("metaschedule", "loop_only", "joint", "joint_conversions", "expert", "peak") + LIBRARIES
#: MetaSchedule's own search defaults (``ms.tune_tir``): no seed, XGBoost scores at random until it
#: holds 100 measurements (at budget 128 in batches of 64: every batch), 512 schedules a
#: generation, 4 generations. What stays the workbench's: candidates built by its code generation
#: and timed in this process by ``tuning.runner`` (3 repeats of 20 ms, TVM's 1 of 100 ms x 3),
#: seed 0
TVM_DEFAULTS: Mapping[str, Any] = MappingProxyType(dict(expert_seed=False, warmup_samples=100, population_size=512,
                                                        genetic_num_iters=4, num_trials_per_iter=64))


@dataclass(frozen=True)
class Workload:
    name: str
    op: str
    input: tuple[int, ...]
    weight: tuple[int, ...]
    attrs: dict
    source: str = ""




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


def tuned_build(graph: Graph, book: LayoutBook, op: str, trace: Any, target: dict) -> tuple[Built, bool]:
    """Build the whole program as a session would (``policy``): the tuned kernel (``trace``;
    None: the op's expert schedule) and each conversion with its analytic schedule, and check it."""
    prog = make_program(graph, book)
    own = {} if trace is None else {op: KernelSchedule("tuned", trace=trace)}
    prog = prog.with_funcs(scheduled_funcs(prog, target, own=own, expert={op}))
    built = prog.build(target)
    return built, built.verify().ok


def kernel_timers(graph: Graph, book: LayoutBook, op: str, trace: Any, target: dict, values: dict[str, np.ndarray],
                  timers: dict[str, Timer], name: str) -> bool:
    """Build ``op`` on ``trace`` under ``book``, put its timer in ``timers[name]`` (and the
    layout's conversions in ``timers[name + "_conversions"]``); whether it verified."""
    built, ok = tuned_build(graph, book, op, trace, target)
    timers[name] = kernel_timer(built, op, values)
    if (conversions := conversions_timer(built, values)) is not None:
        timers[f"{name}_conversions"] = conversions
    return ok


def joint_timers(graph: Graph, book: LayoutBook, op: str, trace: Any, target: dict, values: dict[str, np.ndarray],
                 timers: dict[str, Timer]) -> tuple[bool, int]:
    """The joint kernel's timers (``kernel_timers``); whether it verified, and the bytes its
    layout's conversions move."""
    ok = kernel_timers(graph, book, op, trace, target, values, timers, "joint")
    prog = make_program(graph, book)
    return ok, sum(conversion_bytes(prog, k.name) for k in prog.plan.kernels if k.conversion is not None)


def _remeasured_fields(got: Mapping[str, Remeasured], rounds: int, peak_flops: int = 0,
                       labels: Mapping[str, str] | None = None, missing: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The row's re-measured figures: median and spread per contender (the FMA kernel's as its
    GFLOP/s, one call doing ``peak_flops``), the noisy ones, the fastest library (``labels``:
    the library timers' names for themselves) and the ``missing`` contenders' reasons."""
    out: dict[str, Any] = {"rounds": rounds, "noisy": ", ".join(n for n in CONTENDERS if n in got and got[n].noisy),
                           "missing": "; ".join(f"{LABELS.get(k, k)} ({why})" for k, why in (missing or {}).items())}
    for name in CONTENDERS:
        r = got.get(name)
        out[f"{name}_ms"], out[f"{name}_spread"] = (r.median_ms, r.relative_spread) if r else (None, None)
    peak_ms = out.pop("peak_ms")
    out["peak_gflops"] = peak_flops / (peak_ms * 1e6) if peak_ms and peak_flops else None
    out["library_ms"], out["library"] = fastest({k: out[f"{k}_ms"] for k in LIBRARIES}, labels or {})
    return out


def run_bench(suite: list[Workload], budget: int, out_dir: Path, target: dict, *, search: str = "model",
              seed: int = 0, rounds: int = ROUNDS, libraries: tuple[str, ...] = LIBRARIES,
              on_step: Callable[[str], None] | None = None) -> list[BenchRow]:
    """Run every workload: tune with each tuner (both MetaSchedules, the joint tuner), then
    re-measure their best kernels, the FMA kernel and the ``libraries`` interleaved (``rounds``
    rounds). Progress lines go to ``out_dir/progress/<workload>_<tuner>.jsonl``, the machine's
    state to ``out_dir/machine.json``."""
    out_dir = Path(out_dir)
    if old := sorted((out_dir / "progress").glob("*_tvm-metaschedule.jsonl")):
        raise TuneError(f"{out_dir} holds a benchmark run from before the columns were renamed ({old[0].name}): "
                        "its 'metaschedule' databases are the seeded run's; give --out a new folder")
    (out_dir / "progress").mkdir(parents=True, exist_ok=True)
    say = on_step or (lambda s: None)
    with Sidecar() as sidecar:
        return _run_bench(suite, budget, out_dir, target, search, seed, rounds, libraries, say, sidecar)


def _run_bench(suite: list[Workload], budget: int, out_dir: Path, target: dict, search: str, seed: int, rounds: int,
               libraries: tuple[str, ...], say: Callable[[str], None], sidecar: Sidecar) -> list[BenchRow]:
    rows: list[BenchRow] = []
    timing = TimingRounds.begin(target, rounds, libraries, sidecar, say)
    for w in suite:
        graph, op = workload_graph(w)
        values = graph.random_inputs()
        timers: dict[str, Timer] = {}
        tuned = _tune_all(w, graph, op, budget, out_dir, target, search, seed, values, timers, say) \
            if budget > 0 else {"verified": True}
        rows.append(timing.row(w, graph, op, budget, values, timers, tuned, say))
        timing.write(out_dir, rows)  # after each workload: a stopped run keeps what it measured
    return rows


@dataclass
class TimingRounds:
    """What the interleaved rounds of every workload of a run share: the FMA kernel (the in-run
    peak), the libraries' sidecar and the machine's state at the start."""

    target: dict
    rounds: int
    libraries: tuple[str, ...]
    sidecar: Sidecar
    peak: Timer
    peak_flops: int
    copy_gbs: float
    start: Any
    date: str
    machine: str

    @classmethod
    def begin(cls, target: dict, rounds: int, libraries: tuple[str, ...], sidecar: Sidecar,
              say: Callable[[str], None]) -> "TimingRounds":
        start = machine_state()
        # the copy alone when nothing is cached: get_ceilings would start NumPy's and PyTorch's
        # thread pools in this process, beside TVM's
        say("this machine's copy bandwidth (cached per CPU) and its FMA kernel")
        copy_gbs = copy_bandwidth(target)
        peak_rt, peak_args, peak_flops = peak_call(target)
        return cls(target, rounds, libraries, sidecar, evaluator_timer(peak_rt, "main", peak_args), peak_flops,
                   copy_gbs, start, _dt.date.today().isoformat(), machine_name())

    def row(self, w: Workload, graph: Graph, op: str, budget: int, values: dict[str, np.ndarray],
            timers: dict[str, Timer], tuned: dict[str, Any], say: Callable[[str], None]) -> BenchRow:
        """The workload's row: the tuners' kernels in ``timers``, the expert schedule, the FMA
        kernel and the libraries timed interleaved; ``tuned``: the row's tuning fields."""
        built_e, ok_e = tuned_build(graph, LayoutBook(), op, None, self.target)
        timers["expert"] = kernel_timer(built_e, op, values)
        timers["peak"] = self.peak
        say(f"{w.name}: the libraries ({', '.join(LABELS[k] for k in self.libraries)}), then every contender "
            f"again, interleaved, {self.rounds} rounds")  # one step: the command line's progress bar counts them
        lib, missing = library_timers(self.sidecar, w, target_cores(self.target), self.libraries)
        timers.update(lib)
        before = machine_state()
        got = remeasure(timers, self.rounds)
        steal = steal_pct(before, machine_state())
        fields = _remeasured_fields(got, self.rounds, self.peak_flops,
                                    {k: str(getattr(t, "label", "")) for k, t in lib.items()}, missing)
        moved = tuned.pop("joint_conversion_bytes", 0)
        if budget > 0 and "joint_conversions" not in timers:
            fields["joint_conversions_ms"] = 0.0  # the joint layout converts nothing
        if moved and fields["joint_conversions_ms"]:
            gbs = moved / (fields["joint_conversions_ms"] * 1e6)
            fields.update(joint_conversions_gbs=gbs, joint_conversions_pct_copy=100 * gbs / self.copy_gbs)
        return BenchRow(w.name, w.op, budget, **{**tuned, "verified": bool(tuned["verified"] and ok_e)},
                        date=self.date, machine=self.machine, flops=int(graph.flops(op)), steal_pct=steal, **fields)

    def write(self, out_dir: Path, rows: list[BenchRow]) -> None:
        """``results.csv``, ``results.md`` and ``machine.json`` for the rows so far."""
        write_results(rows, out_dir, _write_machine(out_dir, self.start, rows, self.target, self.copy_gbs))


def _write_machine(out_dir: Path, start: Any, rows: list[BenchRow], target: dict, copy_gbs: float) -> dict[str, Any]:
    """``machine.json``: the state at the start and now, and the FMA kernel's rate in each
    workload's rounds; returns what it wrote."""
    path = write_machine(out_dir, start, machine_state(), cpu=machine_name(), target=target, copy_gbs=copy_gbs,
                         fma_kernel=peak_kernel_shape(target).describe(),
                         peak_gflops={r.workload: r.peak_gflops for r in rows})
    return json.loads(path.read_text())


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
    return kernel_timers(graph, LayoutBook(), op, res.trace, target, values, timers, tuner), res.best_ms


def _tune_all(w: Workload, graph: Graph, op: str, budget: int, out_dir: Path, target: dict, search: str, seed: int,
              values: dict[str, np.ndarray], timers: dict[str, Timer],
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
    ok_b, moved = joint_timers(graph, book, op, jr.trace, target, values, timers)
    return dict(joint_layout=jr.best.label, joint_conversion_bytes=moved, verified=ok_l and ok_m and ok_b,
                joint_s_per_measurement=per_measurement, loop_only_tuning_ms=loop_tuning,
                metaschedule_tuning_ms=ms_tuning, joint_tuning_ms=jr.best_ms)


def write_results(rows: list[BenchRow], out_dir: Path, state: Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    """``results.csv`` (one row per workload) and ``results.md`` (table with geometric means;
    ``state``: the run's machine.json, for the heading)."""
    heading = (f"Machine: {rows[0].machine if rows else machine_name()}; date {rows[0].date if rows else ''}; "
               f"budget {rows[0].budget if rows else ''} measurements per tuner per workload. {describe(state)} "
               f"Times are medians of {rows[0].rounds if rows else ROUNDS} interleaved rounds after tuning (spread: "
               f"(max - min) / median; noisy: above {NOISE:.0%} even when measured again, or peak: a percentage of "
               "the in-run FMA peak above 100, see the peak note); the tuning columns are the tuners' own; the "
               "library is the fastest of PyTorch eager, NumPy (GMM) and torch.compile.")
    gm = {k: summary_ratio([getattr(r, k) for r in rows]) for k in RATIOS}
    footer = (f"Geometric means (above 1: ours is faster): **joint + conversions vs the fastest library: "
              f"{gm['joint_with_conversions_vs_library']}** (joint alone: {gm['joint_vs_library']}); "
              f"vs MetaSchedule (TVM's search defaults, unseeded): {gm['joint_with_conversions_vs_metaschedule']} "
              f"(joint alone: {gm['joint_vs_metaschedule']}); vs the loop-only stage (MetaSchedule seeded by the "
              f"expert schedule, default layout: what the layouts add): {gm['joint_with_conversions_vs_loop_only']} "
              f"(joint alone: {gm['joint_vs_loop_only']}); joint vs PyTorch eager: {gm['joint_vs_torch']}; expert "
              f"schedule alone vs the fastest library: {gm['expert_vs_library']}, vs PyTorch eager: "
              f"{gm['expert_vs_torch']}.")
    shown = [k for k in COLUMNS if k not in ("date", "machine")]  # those two are in the heading
    return write_tables(out_dir, "results", COLUMNS, [r.as_dict() for r in rows], heading, footer, shown, TITLES,
                        shown_rows=[r.shown() for r in rows])


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
            row["model_vs_random"] = ratio(row["random_ms"], row["model_ms"])
            rows.append(row)
            write_study(rows, out_dir)  # after each run: a stopped study keeps what it measured
    return rows


def write_study(rows: list[dict], out_dir: Path) -> Path:
    """``search.csv`` and ``search.md``: the search study's runs as a table, and the geometric mean
    of random / guided."""
    columns = ["workload", "seed", "budget", "model_ms", "random_ms", "model_vs_random", "model_layout", "random_layout"]
    titles = {"model_ms": "model-guided ms", "random_ms": "random ms", "model_vs_random": "random / guided",
              "model_layout": "guided layout"}
    footer = (f"Geometric mean, random / guided: {fmt(geomean([r['model_vs_random'] for r in rows]))}x over "
              f"{len(rows)} runs (above 1: the guided search found faster layouts at the same budget).")
    shown = [c for c in columns if c != "random_layout"]
    return write_tables(out_dir, "search", columns, rows, "The joint stage alone, cost-model-guided vs random "
                        "search at the same budget and seed.", footer, shown, titles)[1]
