"""The end-to-end benchmark behind ``python -m workbench bench --suite networks``: each built-in
network (ResNet-18, MobileNet-V2, a BERT-base encoder layer; batch 1), in one run on one machine:

- ``ours``: the joint layout+loop tuner over the whole graph at a total budget of B measurements
  (equal kernels tuned once, the budget shared by FLOPs: ``stages.tune_session``), the replayed
  program run kernel after kernel;
- ``torch``: PyTorch eager (no autograd), the faster of NCHW and channels-last;
- ``tvm_untuned``: TVM's own Relax pipeline (``relax.get_default_pipeline``: legalize, fuse) with
  no tuning; ``tvm_metaschedule``: ``relax.pipeline.static_shape_tuning_pipeline`` at the same
  total budget B;
- ``onnxruntime``: the module exported to ONNX, ONNX Runtime's CPU provider.

All take the same seeded weights and input; every output is checked against PyTorch's
(``max_abs_err`` is ours). After tuning, every contender is timed again interleaved
(``interleave.remeasure``), as in the single-operator benchmark. Ratios above 1: ours is faster.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .bench import Sidecar, _fmt, _geomean, call_timer, machine_name, write_tables
from .interleave import ROUNDS, Timer, remeasure
from .targets import target_cores

__all__ = ["CONTENDERS", "KERNEL_COLUMNS", "NETWORK_COLUMNS", "NETWORK_NAMES", "run_network_bench", "write_kernel_times",
           "write_network_results"]

NETWORK_NAMES = ("resnet18", "mobilenet_v2", "bert_layer")
NETWORK_COLUMNS = ("network", "budget", "ours_ms", "torch_ms", "tvm_untuned_ms", "tvm_metaschedule_ms",
                   "onnxruntime_ms", "ours_vs_torch", "ours_vs_tvm_metaschedule", "max_abs_err")
CONTENDERS = ("ours", "torch", "tvm_untuned", "tvm_metaschedule", "onnxruntime")


def _ours(name: str, options: Mapping[str, int], budget: int, work: Path, target: dict, x: np.ndarray,
          kernels_csv: Path, seeds: Mapping[str, Any] | None = None) -> tuple[Timer, np.ndarray]:
    """Tune the network's session (joint stage; ``seeds``: other tuned sessions it must beat, e.g.
    a smaller budget's), build the replayed program, run it on ``x``; where its time goes, kernel
    by kernel beside each kernel's tuning figure, is written to ``kernels_csv``."""
    from .session import new_session, replay, save
    from .tuning.check import tuned_figures
    from .tuning.options import TuneOptions
    from .tuning.stages import tune_network

    session = new_session(name, target=target, **options)
    result = tune_network(session, "joint", budget, work / "ours", TuneOptions(progress_path=work / "ours_progress.jsonl"),
                          seeds=seeds)
    save(result.session, work / "ours_session.json")  # to replay, inspect or re-time without tuning again
    (work / "ours_network.json").write_text(json.dumps(result.to_json(), indent=1))
    state = replay(result.session)
    built = state.scheduled_program().build(target)
    values = state.graph.random_inputs(0)  # an imported network's constants are its own weights
    (inp,) = state.graph.inputs
    values[inp] = x
    (out,) = built.run(values).values()
    write_kernel_times(built, values, kernels_csv, tuned_figures(state))
    return call_timer(built.runner(values)), out


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
        wr.writerows({k: _fmt(v) for k, v in r.items()} for r in rows)
    return rows


def _torch_output(name: str, options: Mapping[str, int], x: np.ndarray) -> np.ndarray:
    import torch

    from . import networks

    module, _ = getattr(networks, name)(**options)
    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


def _torch(name: str, options: Mapping[str, int], x: np.ndarray, threads: int) -> Timer:
    """PyTorch eager on the network (made here: this runs in the timing sidecar)."""
    import torch

    from . import networks

    module, _ = getattr(networks, name)(**options)
    torch.set_num_threads(threads)
    xt = torch.from_numpy(x)
    timers = []
    formats = [torch.contiguous_format] + ([torch.channels_last] if xt.dim() == 4 else [])
    for fmt in formats:  # each format on a copy of its own: ``Module.to`` converts in place
        m = copy.deepcopy(module).to(memory_format=fmt)
        xf = xt.contiguous(memory_format=fmt)

        def call(m=m, xf=xf) -> None:
            with torch.no_grad():
                m(xf)

        timers.append(call_timer(call))
    return min(timers, key=lambda t: float(np.median([t() for _ in range(3)])))


def _relax(module: Any, x: np.ndarray) -> Any:
    """The module in Relax, batch norms folded into the convs as our importer does (otherwise
    TVM's kernels would carry four extra element-wise ops per conv and the comparison be unfair)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    from .frontend.convert import prepare

    ep = torch.export.export(module.eval(), (torch.from_numpy(x),))
    return prepare(from_exported_program(ep, unwrap_unit_return_tuple=True))


def _vm_timer(mod: Any, target: dict, x: np.ndarray, pipeline: Any) -> tuple[Timer, np.ndarray]:
    import tvm
    from tvm import relax

    from .targets import target_from

    tgt = target_from(target)
    ex = tvm.compile(mod, target=tgt, relax_pipeline=pipeline(tgt) if callable(pipeline) else pipeline)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    arg = tvm.runtime.tensor(x)
    out = vm["main"](arg)
    return call_timer(lambda: vm["main"](arg)), (out[0] if isinstance(out, (list, tuple)) else out).numpy()


def _tvm_metaschedule(mod: Any, target: dict, x: np.ndarray, budget: int, work: Path) -> tuple[Timer, np.ndarray]:
    """TVM's ``relax.pipeline.static_shape_tuning_pipeline``, pass by pass, with MetaSchedule's
    own defaults but for two things, so that it gets a fair share of the budget:

    - its build and run workers start with the tensor intrinsics imported the light way
      (``startup.import_tensor_intrinsics``). With the default workers each build imports them
      itself, ~30 s on this machine, past the 30 s build timeout: every candidate failed and every
      kernel kept its default schedule (the networks runs before 2026-11-25-networks-all);
    - the budget is spread over the tasks (``num_trials_per_iter`` = budget / tasks, as TVM's
      docstring advises): its default of 64 per iteration spends a budget of 64 on one task."""
    import tvm
    import tvm.s_tir.meta_schedule as ms
    from tvm import relax

    from .targets import target_from
    from .tuning.startup import children_import_workbench, import_tensor_intrinsics

    tgt, db = target_from(target), str(work / "tvm_metaschedule")
    import_tensor_intrinsics()
    with tgt:
        mod = tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                        relax.transform.CanonicalizeBindings(), relax.pipeline.zero_pipeline()])(mod)
        per_task = max(1, budget // max(1, len(ms.relax_integration.extract_tasks(mod, tgt))))
        with children_import_workbench():
            ms.relax_integration.tune_relax(mod, {}, tgt, db, max_trials_global=budget, num_trials_per_iter=per_task,
                                            builder=ms.builder.LocalBuilder(initializer=import_tensor_intrinsics),
                                            runner=ms.runner.LocalRunner(initializer=import_tensor_intrinsics))
        mod = relax.transform.MetaScheduleApplyDatabase(db)(mod)
    return _vm_timer(mod, target, x, "default")


def _onnx_export(module: Any, x: np.ndarray, path: Path) -> None:
    import torch

    torch.onnx.export(module.eval(), (torch.from_numpy(x),), str(path), dynamo=False, opset_version=17,
                      input_names=["x"])


def _onnxruntime_output(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _onnxruntime(path: Path, x: np.ndarray, threads: int) -> Timer:
    """ONNX Runtime's CPU provider on the exported file (runs in the timing sidecar)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feed = {"x": x}
    return call_timer(lambda: sess.run(None, feed))


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def run_network_bench(names: tuple[str, ...], budget: int | tuple[int, ...], out_dir: Path, target: dict, *,
                      options: Mapping[str, Mapping[str, int]] | None = None, rounds: int = ROUNDS,
                      contenders: tuple[str, ...] = CONTENDERS,
                      on_step: Callable[[str], None] | None = None) -> list[dict]:
    """Benchmark each network of ``names`` (see the module docstring; ``options``: a network's
    zoo options, e.g. a shorter sequence); rows as dicts of ``NETWORK_COLUMNS`` plus each
    contender's spread, its error against PyTorch (``*_err``) or why it failed (``*_error``),
    written after each network, and ours kernel by kernel in ``NAME_kernels.csv``
    (``write_kernel_times``). ``contenders`` picks some of them (PyTorch always runs).

    Several budgets (ascending) give a row per network and budget (kernel tables
    ``NAME_bBUDGET_kernels.csv``); each budget's tuning gets the smaller budgets' tuned networks as
    seeds, so it returns none slower (``tuning.stages.tune_network``)."""
    say = on_step or (lambda s: None)
    out_dir = Path(out_dir)
    threads = target_cores(target)
    budgets = tuple(sorted(budget)) if isinstance(budget, tuple) else (budget,)
    rows: list[dict] = []
    with Sidecar() as sidecar:  # PyTorch and ONNX Runtime timed in a process of their own (see Sidecar)
        for name in names:
            seeds: dict[str, Any] = {}
            for b in budgets:
                tag = f"_b{b}" if len(budgets) > 1 else ""
                rows.append(_network_row(name, dict((options or {}).get(name, {})), b, out_dir, target, rounds, say,
                                         sidecar, threads, contenders, tag, dict(seeds)))
                write_network_results(rows, out_dir)
                if (tuned := out_dir / "work" / f"{name}{tag}" / "ours_session.json").exists():
                    from .session import load

                    seeds[f"budget {b}"] = load(tuned)
    return rows


def _network_row(name: str, opts: dict, budget: int, out_dir: Path, target: dict, rounds: int,
                 say: Callable[[str], None], sidecar: Any, threads: int, contenders: tuple[str, ...],
                 tag: str = "", seeds: Mapping[str, Any] | None = None) -> dict:
    from tvm import relax

    from . import networks

    module, example = getattr(networks, name)(**opts)
    x = np.random.default_rng(1).uniform(-1.0, 1.0, tuple(example[0].shape)).astype("float32")
    work = out_dir / "work" / f"{name}{tag}"
    work.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {"network": name, "budget": budget}
    say(f"{name}: PyTorch")
    want = _torch_output(name, opts, x)
    timers: dict[str, Timer] = {"torch": sidecar.timer(_torch, name, opts, x, threads)}
    mod = _relax(module, x)
    onnx_path = work / "model.onnx"

    def onnxruntime() -> tuple[Timer, np.ndarray]:
        _onnx_export(module, x, onnx_path)
        return sidecar.timer(_onnxruntime, onnx_path, x, threads), _onnxruntime_output(onnx_path, x)

    others: dict[str, Callable[[], tuple[Timer, np.ndarray]]] = {
        "ours": lambda: _ours(name, opts, budget, work, target, x, out_dir / f"{name}{tag}_kernels.csv", seeds),
        "tvm_untuned": lambda: _vm_timer(mod, target, x, relax.get_default_pipeline),
        "tvm_metaschedule": lambda: _tvm_metaschedule(mod, target, x, budget, work),
        "onnxruntime": onnxruntime}
    for k, make in others.items():
        if k not in contenders:
            continue
        say(f"{name}: {k}" + (f", budget {budget}" if k in ("ours", "tvm_metaschedule") else ""))
        try:
            timers[k], out = make()
        except Exception as e:  # noqa: BLE001 - a contender that fails is reported, the others still run
            row[f"{k}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            continue
        row[f"{k}_err"] = float(np.max(np.abs(np.asarray(out, np.float64) - want)))
    say(f"{name}: {', '.join(timers)} again, interleaved, {rounds} rounds")
    got = remeasure(timers, rounds)
    row.update({f"{k}_ms": got[k].median_ms if k in got else None for k in CONTENDERS})
    row.update({f"{k}_spread": got[k].relative_spread for k in got})
    row["ours_vs_torch"] = _ratio(row["torch_ms"], row["ours_ms"])
    row["ours_vs_tvm_metaschedule"] = _ratio(row["tvm_metaschedule_ms"], row["ours_ms"])
    row["max_abs_err"] = row.pop("ours_err", None)
    row["reference_max_abs"] = float(np.max(np.abs(want)))
    row["noisy"] = ", ".join(k for k in got if got[k].noisy)
    return row


def write_network_results(rows: list[dict], out_dir: Path) -> tuple[Path, Path]:
    """``networks.csv`` (the issue's columns, then spreads and the other contenders' errors) and
    ``networks.md`` (the table and the geometric means)."""
    from .tables import summary_ratio  # a ratio no network has is named missing, never "nan" or a bare "x"

    extra = sorted({k for r in rows for k in r} - set(NETWORK_COLUMNS))

    def gm(key: str) -> str:
        return summary_ratio([r.get(key) for r in rows], "network")

    heading = (f"Machine: {machine_name()}; batch 1; budget {rows[0]['budget'] if rows else ''} measurements per "
               "network for each tuner. Times are medians of interleaved rounds after tuning.")
    footer = (f"Geometric mean, ours vs PyTorch: {gm('ours_vs_torch')}; ours vs TVM Relax + MetaSchedule: "
              f"{gm('ours_vs_tvm_metaschedule')} (above 1: ours is faster).")
    return write_tables(out_dir, "networks", [*NETWORK_COLUMNS, *extra], rows, heading, footer, NETWORK_COLUMNS)
