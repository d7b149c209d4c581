"""The benchmark behind ``python -m workbench bench``: for each single-operator workload of a
suite, in one run on one machine, (a) MetaSchedule loop-only on the default layout at a
budget of B measurements, (b) the joint layout+loop tuner at the same total budget B,
(c) PyTorch on the CPU (best of NCHW and channels-last), (d) NumPy for GMM. Every tuned
kernel is checked against the reference before its time is reported.

Ratios above 1 mean the joint tuner is faster: ``joint_vs_metaschedule = (a)/(b)``,
``joint_vs_torch = (c)/(b)``.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .graph import Graph, GraphBuilder
from .joint import joint_tune
from .layout import LayoutBook
from .layouts import apply_actions
from .metaschedule import TuneTask, read_progress, tune_loops
from .program import make_program

__all__ = ["Workload", "BenchRow", "load_suite", "workload_graph", "run_bench", "write_results", "machine_name"]

COLUMNS = ["workload", "op", "budget", "metaschedule_ms", "joint_ms", "joint_layout", "joint_conversions_ms",
           "torch_ms", "numpy_ms", "joint_vs_metaschedule", "joint_vs_torch", "verified", "date", "machine"]


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
    metaschedule_ms: float | None
    joint_ms: float | None
    joint_layout: str
    joint_conversions_ms: float | None
    torch_ms: float | None
    numpy_ms: float | None
    verified: bool
    date: str
    machine: str

    @property
    def joint_vs_metaschedule(self) -> float | None:
        return _ratio(self.metaschedule_ms, self.joint_ms)

    @property
    def joint_vs_torch(self) -> float | None:
        return _ratio(self.torch_ms, self.joint_ms)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["joint_vs_metaschedule"], d["joint_vs_torch"] = self.joint_vs_metaschedule, self.joint_vs_torch
        return {k: d[k] for k in COLUMNS}


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
    cpu = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def _median_ms(fn: Callable[[], Any], min_s: float = 0.2, repeat: int = 7) -> float:
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-6)
    number = max(1, int(min_s / repeat / one))
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number * 1e3)
    return float(np.median(runs))


def torch_ms(w: Workload, threads: int) -> float | None:
    """PyTorch CPU time, the best of the default (NCHW) and channels-last memory formats."""
    import torch

    torch.set_num_threads(threads)
    x, wt = torch.rand(w.input), torch.rand(w.weight)
    if w.op == "matmul":
        with torch.no_grad():
            return _median_ms(lambda: x @ wt)
    fn = getattr(torch.nn.functional, w.op)
    attrs = {k: v for k, v in w.attrs.items() if k != "depthwise"}
    best = math.inf
    formats = [torch.contiguous_format] + ([torch.channels_last] if x.dim() == 4 else
                                           [torch.channels_last_3d] if x.dim() == 5 else [])
    with torch.no_grad():
        for fmt in formats:
            xf, wf = x.contiguous(memory_format=fmt), wt.contiguous(memory_format=fmt)
            best = min(best, _median_ms(lambda: fn(xf, wf, **attrs)))
    return best


def numpy_ms(w: Workload) -> float | None:
    if w.op != "matmul":
        return None
    a, b = np.random.rand(*w.input).astype("float32"), np.random.rand(*w.weight).astype("float32")
    return _median_ms(lambda: a @ b)


def _verified(graph: Graph, book: LayoutBook, op: str, trace: Any, target: dict) -> tuple[bool, float | None]:
    """Build the whole program with the tuned kernel, check it, and time its conversions."""
    from .loops import apply_trace_json

    prog = make_program(graph, book)
    prog = prog.with_funcs({op: apply_trace_json(prog.funcs[op], trace).mod["main"]})
    built = prog.build(target)
    ok = built.verify().ok
    conv = [t.latency_ms for t in built.time(repeat=3, min_ms=5) if t.name != op]
    return ok, (sum(conv) if conv else 0.0)


def run_bench(suite: list[Workload], budget: int, out_dir: Path, target: dict, *, search: str = "model",
              seed: int = 0, on_step: Callable[[str], None] | None = None) -> list[BenchRow]:
    """Run every workload; progress lines go to ``out_dir/progress/<workload>_<tuner>.jsonl``."""
    out_dir = Path(out_dir)
    (out_dir / "progress").mkdir(parents=True, exist_ok=True)
    rows = []
    date, machine = _dt.date.today().isoformat(), machine_name()
    threads = int(target.get("num-cores", os.cpu_count() or 1))
    for w in suite:
        graph, op = workload_graph(w)
        say = on_step or (lambda s: None)
        say(f"{w.name}: MetaSchedule loop-only, budget {budget}")
        prog = make_program(graph)
        ms_res = tune_loops([TuneTask(op, prog.funcs[op], prog.flops[op])], target, out_dir / "work" / w.name / "ms",
                            budget, stage="loop", progress_path=out_dir / "progress" / f"{w.name}_metaschedule.jsonl",
                            seed=seed, isolated=False)[op]
        ok_a = ms_res.best_ms is not None and _verified(graph, LayoutBook(), op, ms_res.trace, target)[0]
        say(f"{w.name}: joint layout+loop, budget {budget}")
        jr = joint_tune(graph, LayoutBook(), op, target, out_dir / "work" / w.name / "joint", budget, search=search,
                        progress_path=out_dir / "progress" / f"{w.name}_joint.jsonl", seed=seed)
        book = apply_actions(graph, LayoutBook(), jr.best.actions(graph, op))
        ok_b, conv_ms = _verified(graph, book, op, jr.trace, target)
        say(f"{w.name}: PyTorch and NumPy baselines")
        rows.append(BenchRow(w.name, w.op, budget, ms_res.best_ms, jr.best_ms, jr.best.label, conv_ms,
                             torch_ms(w, threads), numpy_ms(w), bool(ok_a and ok_b), date, machine))
        write_results(rows, out_dir)  # after each workload: a stopped run keeps what it measured
    return rows


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _geomean(vals: list[float | None]) -> float | None:
    vals = [v for v in vals if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def write_results(rows: list[BenchRow], out_dir: Path) -> tuple[Path, Path]:
    """``results.csv`` (one row per workload) and ``results.md`` (table with geometric means)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / "results.csv", out_dir / "results.md"
    with csv_path.open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=COLUMNS)
        wr.writeheader()
        for r in rows:
            wr.writerow({k: _fmt(v) for k, v in r.as_dict().items()})
    head = ["workload", "op", "budget", "MetaSchedule ms", "joint ms", "joint layout", "conversions ms",
            "PyTorch ms", "NumPy ms", "joint vs MetaSchedule", "joint vs PyTorch", "verified"]
    lines = [f"Machine: {rows[0].machine if rows else machine_name()}; date {rows[0].date if rows else ''}; "
             f"budget {rows[0].budget if rows else ''} measurements per tuner per workload.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        d = r.as_dict()
        lines.append("| " + " | ".join(_fmt(d[k]) for k in COLUMNS[:-2]) + " |")
    gm_ms, gm_t = _geomean([r.joint_vs_metaschedule for r in rows]), _geomean([r.joint_vs_torch for r in rows])
    lines += ["", f"Geometric mean, joint vs MetaSchedule: {_fmt(gm_ms)}x; joint vs PyTorch: {_fmt(gm_t)}x "
                  "(above 1: the joint tuner is faster)."]
    md_path.write_text("\n".join(lines) + "\n")
    return csv_path, md_path


def curves(out_dir: Path) -> dict[str, dict[str, list[dict]]]:
    """Progress lines per workload and tuner, for the tuning-curve figures."""
    out: dict[str, dict[str, list[dict]]] = {}
    for p in sorted((Path(out_dir) / "progress").glob("*.jsonl")):
        name, _, tuner = p.stem.rpartition("_")
        out.setdefault(name, {})[tuner] = read_progress(p)
    return out


def search_study(suite: list[Workload], joint_budget: int, out_dir: Path, target: dict, *, seeds: tuple[int, ...] = (0, 1),
                 per_candidate: int = 4, on_step: Callable[[str], None] | None = None) -> list[dict]:
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
                                joint_budget, joint_fraction=1.0, per_candidate=per_candidate, search=search, seed=seed)
                row[f"{search}_ms"], row[f"{search}_layout"] = jr.best_ms, jr.best.label
            row["model_vs_random"] = _ratio(row["random_ms"], row["model_ms"])
            rows.append(row)
    lines = ["| workload | seed | budget | model-guided ms | random ms | random / guided | guided layout |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['workload']} | {r['seed']} | {r['budget']} | {_fmt(r['model_ms'])} | {_fmt(r['random_ms'])} | "
              f"{_fmt(r['model_vs_random'])} | {r['model_layout']} |" for r in rows]
    lines += ["", f"Geometric mean, random / guided: {_fmt(_geomean([r['model_vs_random'] for r in rows]))}x "
                  "(above 1: the guided search found faster layouts at the same budget)."]
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "search.md").write_text("\n".join(lines) + "\n")
    return rows
