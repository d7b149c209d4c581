"""The end-to-end benchmark behind ``python -m workbench bench --suite networks``: each built-in
network (ResNet-18, MobileNet-V2, a BERT-base encoder layer, a Llama decoder layer's prefill and
decode step; batch 1) in one run on one machine. ``ours``: the joint layout+loop tuner over the
whole graph at a budget of B measurements, timed as ``network.so`` (one Relax VM module). The
engines (``ENGINES``: OpenVINO, ONNX Runtime, ``torch.compile``, PyTorch eager; ``engines``) and
TVM's own Relax pipelines, untuned and with MetaSchedule (``network_contenders``), take the same
seeded weights and inputs; every output is checked against PyTorch's. After tuning every contender
is timed again interleaved (``interleave.remeasure``); ratios above 1: ours is faster. A contender
that fails is named in ``missing`` and the run goes on. Also: the peak memories (``ours_peak_mb``,
``onnxruntime_peak_mb``), ours kernel by kernel (``NAME_kernels.csv``) and beside the engines' own
profiles op by op (``NAME_by_op.csv``, ``byop``), and for a decode step how near the copy ceiling
its weights stream (``streaming``). See ``run_network_bench``."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from .network_contenders import (max_error, network_inputs, onnx_export, ours_per_task, relax_module, torch_outputs,
                                  torch_timer, tvm_metaschedule_timer, vm_timer)
from .streaming import STREAMING, weight_streaming
from workbench.engine.measure.library import Sidecar

from .suite import machine_name
from .tables import fmt, write_tables
from workbench.engine.base.interleave import ROUNDS, Timer, call_timer, remeasure
from workbench.engine.build.targets import target_cores

if TYPE_CHECKING:
    from workbench.engine.measure.byop import EngineProfile

__all__ = ["CONTENDERS", "ENGINES", "KERNEL_COLUMNS", "NETWORK_COLUMNS", "NETWORK_NAMES", "best_engine",
           "fused_attention_view", "ours_peak_mb", "run_network_bench", "write_by_op", "write_kernel_times",
           "write_network_results"]

NETWORK_NAMES = ("resnet18", "mobilenet_v2", "bert_layer", "llama_layer_prefill", "llama_layer_decode")
NETWORK_COLUMNS = ("network", "budget", "ours_vs_best_engine", "best_engine", "best_engine_ms", "ours_ms",
                   "openvino_ms", "onnxruntime_ms", "torch_compile_ms", "torch_ms", "tvm_untuned_ms",
                   "tvm_metaschedule_ms", "ours_vs_torch", "ours_vs_tvm_metaschedule", "ours_tuning_min",
                   "tvm_metaschedule_tuning_min", "torch_compile_compile_s", "ours_peak_mb", "onnxruntime_peak_mb",
                   "max_abs_err", "pct_of_bandwidth", "missing")
CONTENDERS = ("ours", "torch", "torch_compile", "openvino", "onnxruntime", "tvm_untuned", "tvm_metaschedule")
#: the Markdown table's columns
SHOWN = ("network", "budget", "ours_vs_best_engine", "best_engine", "best_engine_ms", "ours_ms", "openvino_ms",
         "onnxruntime_ms", "torch_compile_ms", "torch_ms", "tvm_metaschedule_ms", "ours_vs_tvm_metaschedule",
         "ours_tuning_min", "tvm_metaschedule_tuning_min", "ours_peak_mb", "onnxruntime_peak_mb", "pct_of_bandwidth",
         "missing")
#: the engines a user would deploy instead of ours; ``best_engine`` is the fastest of them
ENGINES = ("openvino", "onnxruntime", "torch_compile", "torch")
#: how the tables name each contender
LABELS = {"ours": "ours", "torch": "PyTorch eager", "torch_compile": "torch.compile", "openvino": "OpenVINO",
          "onnxruntime": "ONNX Runtime", "tvm_untuned": "TVM Relax (untuned)",
          "tvm_metaschedule": "TVM Relax + MetaSchedule"}


def _ours(name: str, options: Mapping[str, int], budget: int, work: Path, target: dict, xs: tuple[np.ndarray, ...],
          kernels_csv: Path, seeds: Mapping[str, Any] | None = None,
          cold: bool = False) -> tuple[Timer, list[np.ndarray]]:
    """Tune the network's session (joint stage; ``seeds``: other tuned sessions it must beat, e.g.
    a smaller budget's; ``cold``: ``TuneOptions.cold``), build the replayed program, run it on
    ``xs`` (the graph's inputs, in order); where its time goes, kernel by kernel beside each
    kernel's tuning figure, is written to ``kernels_csv``. Returns the timer and the outputs, in
    the graph's order."""
    from workbench.engine.base.errors import BuildError
    from workbench.engine.build.relaxnet import build_network
    from workbench.engine.session.session import new_session, replay, save
    from workbench.engine.tuning.check import tuned_figures
    from workbench.engine.tuning.options import TuneOptions
    from workbench.engine.tuning.stages import tune_network

    session = new_session(name, target=target, **options)
    tuning = TuneOptions(progress_path=work / "ours_progress.jsonl", cold=cold)
    result = tune_network(session, "joint", budget, work / "ours", tuning, seeds=seeds)
    save(result.session, work / "ours_session.json")  # to replay, inspect or re-time without tuning again
    (work / "ours_network.json").write_text(json.dumps(result.to_json(), indent=1))
    state = replay(result.session)
    prog = state.scheduled_program()
    built = prog.build(target)
    values = state.graph.random_inputs(0)  # an imported network's constants are its own weights
    values.update(zip(state.graph.inputs, xs))
    outs = built.run(values)
    write_kernel_times(built, values, kernels_csv, tuned_figures(state))
    # what is timed is what replay writes and a user deploys: network.so, one Relax VM module
    net = build_network(prog, values, target)
    (work / "ours_memory.json").write_text(json.dumps(net.memory.row(), indent=1))
    main, args = net.vm()["main"], net.args(values)
    vm_outs = net.run(values)
    for t in state.graph.outputs:  # outputs leave in their original layout; the check compares them
        if vm_outs[t].shape != outs[t].shape:
            raise BuildError(f"network.so's output {t} has shape {vm_outs[t].shape}, the kernels' {outs[t].shape}")
    return call_timer(lambda: main(*args)), [vm_outs[t] for t in state.graph.outputs]


KERNEL_COLUMNS = ("kernel", "kind", "ms", "tuned_ms", "vs_tuned", "share", "gflops", "ops")


def write_kernel_times(built: Any, values: Mapping[str, np.ndarray], path: Path,
                       tuned: Mapping[str, float] | None = None) -> list[dict]:
    """Each kernel of ``built`` timed alone (``Built.time``), slowest first: its median ms, its
    tuning's figure (``tuned``: kernel -> ms) and the ratio, its share of the sum, GFLOP/s, whether
    it is a stand-alone conversion, and the ops it runs."""
    plan = built.program.plan
    kinds = {k.name: ("conversion" if k.conversion is not None else "kernel") for k in plan.kernels}
    ops = {k.name: " ".join(k.ops) for k in plan.kernels}
    timings = built.time(values, repeat=3, min_ms=10.0)
    total = sum(t.latency_ms for t in timings) or 1.0
    tuned = tuned or {}
    rows = sorted(({"kernel": t.name, "kind": kinds[t.name], "ms": t.latency_ms, "tuned_ms": tuned.get(t.name),
                    "vs_tuned": t.latency_ms / tuned[t.name] if tuned.get(t.name) else None,
                    "share": t.latency_ms / total,
                    "gflops": t.flops / t.latency_ms / 1e6 if t.latency_ms > 0 else 0.0, "ops": ops[t.name]}
                   for t in timings), key=lambda r: -r["ms"])
    with Path(path).open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=KERNEL_COLUMNS)
        wr.writeheader()
        wr.writerows({k: fmt(v) for k, v in r.items()} for r in rows)
    return rows


def ours_peak_mb(work: Path) -> float | None:
    """Ours' peak memory in MiB: what ``network.so`` holds during a call, by Relax's static memory
    plan (``relaxnet.MemoryPlan``: the planned storage of the intermediates, the weights and the
    outputs); None when ours did not build."""
    if not (path := work / "ours_memory.json").exists():
        return None
    m = json.loads(path.read_text())
    return m["peak_planned_mb"] + m["constants_mb"] + m["outputs_mb"]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _work_dir(out_dir: Path, name: str, tag: str) -> Path:
    """Where one network's (and budget's) tuning, sessions and exports go."""
    return out_dir / "work" / f"{name}{tag}"


def run_network_bench(names: tuple[str, ...], budget: int | tuple[int, ...], out_dir: Path, target: dict, *,
                      options: Mapping[str, Mapping[str, int]] | None = None, rounds: int = ROUNDS,
                      contenders: tuple[str, ...] = CONTENDERS, cold: bool = False,
                      on_step: Callable[[str], None] | None = None) -> list[dict]:
    """Benchmark each network of ``names`` (see the module docstring; ``options``: a network's
    zoo options, e.g. a shorter sequence); rows as dicts of ``NETWORK_COLUMNS`` plus each
    contender's spread, its error against PyTorch (``*_err``) or why it failed (``*_error``),
    written after each network, ours kernel by kernel in ``NAME_kernels.csv``
    (``write_kernel_times``) and beside the engines op by op in ``NAME_by_op.csv``
    (``write_by_op``). ``contenders`` picks some of them (PyTorch always runs); ``cold``: our
    tuning times on flushed caches (``TuneOptions.cold``).

    Several budgets (ascending) give a row per network and budget (kernel tables
    ``NAME_bBUDGET_kernels.csv``); each budget's tuning gets the smaller budgets' tuned networks as
    seeds, so it returns none slower (``tuning.stages.tune_network``)."""
    say = on_step or (lambda s: None)
    out_dir = Path(out_dir)
    threads = target_cores(target)
    budgets = tuple(sorted(budget)) if isinstance(budget, tuple) else (budget,)
    rows: list[dict] = []
    with Sidecar() as sidecar:  # PyTorch and the engines timed in a process of their own (see Sidecar)
        for name in names:
            seeds: dict[str, Any] = {}
            for b in budgets:
                tag = f"_b{b}" if len(budgets) > 1 else ""
                rows.append(_network_row(name, dict((options or {}).get(name, {})), b, out_dir, target, rounds, say,
                                         sidecar, threads, contenders, tag, dict(seeds), cold))
                write_network_results(rows, out_dir)
                if (tuned := _work_dir(out_dir, name, tag) / "ours_session.json").exists():
                    from workbench.engine.session.session import load

                    seeds[f"budget {b}"] = load(tuned)
    return rows


def _failure(e: Exception) -> str:
    """A contender's failure in a line: the sidecar's report as it came, else the error's type and text."""
    text, sidecar = str(e), "the timing sidecar failed: "
    if text.startswith(sidecar):
        return text.removeprefix(sidecar).splitlines()[0][:200]
    return f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"


def _network_row(name: str, opts: dict, budget: int, out_dir: Path, target: dict, rounds: int,
                 say: Callable[[str], None], sidecar: Any, threads: int, contenders: tuple[str, ...],
                 tag: str = "", seeds: Mapping[str, Any] | None = None,
                 cold: bool = False) -> dict:
    from tvm import relax

    from workbench.engine.measure import engines
    from workbench.engine.models import networks

    module, example = getattr(networks, name)(**opts)
    xs = network_inputs(example)
    work = _work_dir(out_dir, name, tag)
    work.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {"network": name, "budget": budget}
    say(f"{name}: PyTorch")
    want = torch_outputs(name, opts, xs)
    timers: dict[str, Timer] = {"torch": sidecar.timer(torch_timer, name, opts, xs, threads)}
    mod = relax_module(module, xs)
    onnx_path = work / "model.onnx"
    kernels_csv = out_dir / f"{name}{tag}_kernels.csv"

    def exported() -> Path:
        if not onnx_path.exists():
            onnx_export(module, xs, onnx_path)
        return onnx_path

    def in_sidecar(make: Callable[..., Timer], *args: Any) -> tuple[Timer, float | None]:
        t = sidecar.timer(make, *args, threads, want)
        return t, engines.label_error(t.label)

    makers: dict[str, Callable[[], tuple[Timer, Any]]] = {
        "ours": lambda: _ours(name, opts, budget, work, target, xs, kernels_csv, seeds, cold),
        "torch_compile": lambda: in_sidecar(engines.torch_compile_timer, name, opts, xs),
        "openvino": lambda: in_sidecar(engines.openvino_timer, exported(), xs),
        "onnxruntime": lambda: in_sidecar(engines.onnxruntime_timer, exported(), xs),
        "tvm_untuned": lambda: vm_timer(mod, target, xs, relax.get_default_pipeline),
        "tvm_metaschedule": lambda: tvm_metaschedule_timer(mod, target, xs, budget, work,
                                                           ours_per_task(work / "ours_progress.jsonl"))}
    missing: dict[str, str] = {}
    for k, make in makers.items():
        if k not in contenders:
            continue
        say(f"{name}: {k}" + (f", budget {budget}" if k in ("ours", "tvm_metaschedule") else ""))
        start, started = time.perf_counter(), time.time()
        try:
            timers[k], out = make()
        except Exception as e:  # noqa: BLE001 - a contender that fails is reported, the others still run
            row[f"{k}_error"] = missing[k] = _failure(e)
            continue
        spent = time.perf_counter() - start
        if k == "ours" and (saved := work / "ours_session.json").exists():  # saved the moment tuning returned
            row["ours_tuning_min"] = (saved.stat().st_mtime - started) / 60
        row.update({"tvm_metaschedule": {"tvm_metaschedule_tuning_min": spent / 60},
                    "torch_compile": {"torch_compile_compile_s": spent}}.get(k, {}))
        row[f"{k}_err"] = out if out is None or isinstance(out, float) else max_error(out, want)
    say(f"{name}: {', '.join(timers)} again, interleaved, {rounds} rounds")
    got = remeasure(timers, rounds)
    row.update({f"{k}_ms": got[k].median_ms if k in got else None for k in CONTENDERS})
    row.update({f"{k}_spread": got[k].relative_spread for k in got})
    row.update(best_engine({k: row[f"{k}_ms"] for k in CONTENDERS}))
    row["ours_vs_torch"] = _ratio(row["torch_ms"], row["ours_ms"])
    row["ours_vs_tvm_metaschedule"] = _ratio(row["tvm_metaschedule_ms"], row["ours_ms"])
    row["max_abs_err"] = row.pop("ours_err", None)
    row["reference_max_abs"] = max(float(np.max(np.abs(w))) for w in want)
    row["noisy"] = ", ".join(k for k in got if got[k].noisy)
    say(f"{name}: peak memory and the engines' profiles, op by op")
    if "ours" in timers:
        row["ours_peak_mb"] = ours_peak_mb(work)
    if "onnxruntime" in timers:
        try:
            row["onnxruntime_peak_mb"] = engines.in_fresh_process(engines.onnxruntime_peak_mb, onnx_path, xs, threads)
        except Exception as e:  # noqa: BLE001 - a figure that cannot be had is named, the row stays
            missing["onnxruntime_peak_mb"] = _failure(e)
    if "ours" in timers and onnx_path.exists() and kernels_csv.exists():
        try:
            profiles = engines.in_fresh_process(engines.profiles, onnx_path, xs, threads)
            missing.update({f"{k} profile": p["error"] for k, p in profiles.items() if "error" in p})
            write_by_op(out_dir / f"{name}{tag}_by_op.csv",
                        *fused_attention_view([(n.name, n.type) for n in _graph(name, opts).nodes],
                                              engines.onnx_nodes(onnx_path)), kernels_csv,
                        {k: (p["times"], p["to_onnx"]) for k, p in profiles.items() if "error" not in p})
        except Exception as e:  # noqa: BLE001 - the by-op table is named missing, the row stays
            missing["by-op table"] = _failure(e)
    if name in STREAMING and "ours" in timers and kernels_csv.exists():
        row.update(weight_streaming(_graph(name, opts), kernels_csv, target, row))
    row["missing"] = "; ".join(f"{LABELS.get(k, k)} ({why})" for k, why in missing.items())
    return row


def _graph(name: str, opts: Mapping[str, int]) -> Any:
    """Our graph of built-in network ``name`` (the one ours' session tunes)."""
    from workbench.engine.models import zoo

    return zoo.load(name, **opts)


def best_engine(medians: Mapping[str, float | None]) -> dict[str, Any]:
    """``best_engine`` (the fastest of ``ENGINES`` measured), ``best_engine_ms`` and
    ``ours_vs_best_engine`` from the contenders' re-measured medians (above 1: ours is faster).

    >>> best_engine({"ours": 2.0, "openvino": 3.0, "onnxruntime": 2.5, "torch": None, "tvm_untuned": 1.0})
    {'best_engine': 'onnxruntime', 'best_engine_ms': 2.5, 'ours_vs_best_engine': 1.25}
    """
    got = {k: v for k, v in medians.items() if k in ENGINES and v}
    best = min(got, key=got.__getitem__) if got else None
    ms = got.get(best) if best else None
    return {"best_engine": best, "best_engine_ms": ms, "ours_vs_best_engine": _ratio(ms, medians.get("ours"))}


#: the by-op table's last row: what did not map
BY_OP_UNMAPPED = "unmapped"


def fused_attention_view(ours: list[tuple[str, str]], onnx_nodes: list) -> tuple[list[tuple[str, str]], list]:
    """Our ops and the ONNX nodes as the by-op match should see them where ours has a fused
    attention op (a decoder layer): its ONNX form holds two matrix products with no weight, the
    scores and the context; the scores' heads a segment, matched to our attention op (typed
    ``matmul (attention)`` so that it heads one too), the context's counts in that segment.
    Without an attention op both lists are returned as they are."""
    from dataclasses import replace

    if not any(t == "attention" for _, t in ours):
        return ours, onnx_nodes
    produced = {o for n in onnx_nodes for o in n.outputs}
    seen, view = 0, []
    for n in onnx_nodes:
        if n.op_type == "MatMul" and all(i in produced for i in n.inputs):  # no weight: inside attention
            seen += 1
            n = n if seen % 2 else replace(n, op_type="MatMul (attention context)")
        view.append(n)
    return [(name, "matmul (attention)" if t == "attention" else t) for name, t in ours], view


def write_by_op(path: Path, ours: list[tuple[str, str]], onnx_nodes: list, kernels_csv: Path,
                engine_profiles: Mapping[str, "EngineProfile"]) -> list[dict]:
    """``NAME_by_op.csv``: ours kernel by kernel (``kernels_csv``, ``write_kernel_times``' table)
    beside each engine's own per-node times, one row per segment of our graph
    (``byop.by_op_rows``); a last row names, per engine, the nodes that did not map and their ms.
    The engines' figures are their profilers' (with their overhead: on a tiny network they sum
    to more than the engine's timed run), for where the time goes, not for the headline."""
    from workbench.engine.measure.byop import BY_OP_COLUMNS, by_op_rows

    with Path(kernels_csv).open() as f:
        kernels = list(csv.DictReader(f))
    rows, unmapped = by_op_rows(ours, kernels, onnx_nodes, engine_profiles)
    lost = {"op": BY_OP_UNMAPPED, "type": "", "ours_kernels": "", "onnx_nodes": " ".join(unmapped.get("onnx", ()))}
    for engine, (times, _) in engine_profiles.items():
        lost[f"{engine}_ms"] = sum(times[n] for n in unmapped.get(engine, ())) or None
        lost["onnx_nodes"] += "".join(f" {engine}:{n}" for n in unmapped.get(engine, ()))
    with Path(path).open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=BY_OP_COLUMNS)
        wr.writeheader()
        wr.writerows({k: fmt(r.get(k)) for k in BY_OP_COLUMNS} for r in [*rows, lost])
    return rows


def write_network_results(rows: list[dict], out_dir: Path) -> tuple[Path, Path]:
    """``networks.csv`` (the issue's columns, then spreads and the other contenders' errors) and
    ``networks.md`` (the table and the geometric means)."""
    from .tables import summary_ratio  # a ratio no network has is named missing, never "nan" or a bare "x"

    extra = sorted({k for r in rows for k in r} - set(NETWORK_COLUMNS))

    def gm(key: str) -> str:
        return summary_ratio([r.get(key) for r in rows], "network")

    heading = (f"Machine: {machine_name()}; batch 1; budget {rows[0]['budget'] if rows else ''} measurements per "
               "network for each tuner. Times are medians of interleaved rounds after tuning; the best engine is "
               "the fastest of OpenVINO, ONNX Runtime, torch.compile and PyTorch eager.")
    footer = (f"Geometric mean, ours vs the best engine: {gm('ours_vs_best_engine')}; ours vs PyTorch: "
              f"{gm('ours_vs_torch')}; ours vs TVM Relax + MetaSchedule: {gm('ours_vs_tvm_metaschedule')} "
              "(above 1: ours is faster).")
    return write_tables(out_dir, "networks", [*NETWORK_COLUMNS, *extra], rows, heading, footer, SHOWN)
