"""The command line: ``python -m workbench replay|export|tune|bench|ceilings|import ...``.

It calls the same engine functions as the app. A user error (any ``WorkbenchError``, an
unreadable or unwritable path) prints one line, ``error: ...``, on stderr and exits with
status 2, without a traceback; a replay whose outputs do not match the reference exits with 1.

Each command imports its engine modules only when it runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.build.targets import DEFAULT_TARGET


def _bar(desc: str) -> tuple[tqdm, Callable[[str], None]]:
    """A status bar on stderr (shown on a terminal only): ``desc: step [elapsed]``."""
    bar = tqdm(desc=desc, bar_format="{desc}: {postfix} [{elapsed}]", file=sys.stderr, disable=None)
    return bar, lambda msg: (bar.set_postfix_str(msg), bar.refresh())


def _target(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        t = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkbenchError(f"--target must be a JSON object such as '{{\"kind\": \"llvm\", \"num-cores\": 2}}': {e}")
    if not isinstance(t, dict):
        raise WorkbenchError("--target must be a JSON object, e.g. '{\"kind\": \"llvm\", \"num-cores\": 2}'")
    from workbench.engine.session.session import check_target

    check_target(t)
    return t


def cmd_replay(a: argparse.Namespace) -> int:
    from workbench.engine.session.artifacts import replay_to
    from workbench.engine.session.session import load

    bar, say = _bar(f"replay {Path(a.session).name}")
    try:
        say("loading and validating the session")
        session = load(a.session)
        out = Path(a.out or Path("work") / "replay" / session.name)
        report = replay_to(session, out, _target(a.target), progress=say)
    finally:
        bar.close()
    for k in report.kernels:
        print(f"{k['name']:>28}: {k['latency_ms']:9.4f} ms median (min {k['min_ms']:.4f}, spread {k['spread_ms']:.4f} "
              f"over {k['repeats']} runs{', NOISY' if k['noisy'] else ''})  {k['gflops']:8.2f} GFLOP/s")
    print(f"{'total':>28}: {report.total_ms:9.4f} ms median (min {report.total_min_ms:.4f}, spread "
          f"{report.total_spread_ms:.4f} over {report.repeats} runs{', NOISY' if report.noisy else ''}); "
          f"max abs error {report.max_abs_error:.2e}, "
          f"max rel error {report.max_rel_error:.2e}; ok: {report.ok}; written to {out}")
    if (src := report.source) is not None:
        print(f"{'vs ' + src['framework']:>28}: max abs error {src['max_abs_error']:.2e}, "
              f"max rel error {src['max_rel_error']:.2e}; ok: {src['ok']}")
    if (net := report.network) is not None:
        mem, ins = net["memory"], ", ".join(f"{t} {tuple(s)}" for t, s in net["inputs"].items())
        print(f"{net['file']:>28}: {net['latency_ms']:9.4f} ms median (min {net['min_ms']:.4f}, spread "
              f"{net['spread_ms']:.4f}), the whole network on the Relax VM; max rel error {net['max_rel_error']:.2e}; "
              f"ok: {net['ok']}; {mem['peak_planned_mb']:.2f} MB planned for {mem['intermediates_sum_mb']:.2f} MB "
              f"of intermediates")
        print(f"{'':>28}  plain TVM: tvm.relax.VirtualMachine(tvm.runtime.load_module('{out / net['file']}'), "
              f"tvm.cpu())['main']({ins}) -> ({', '.join(net['outputs'])},)")
    if not report.ok:
        what = (f"{src['framework']}'s (max relative error {src['max_rel_error']:.2e})" if src and not src["ok"]
                else f"the reference (max relative error {report.max_rel_error:.2e})")
        print(f"error: outputs differ from {what}; see {out / 'report.json'}", file=sys.stderr)
        return 1
    return 0


def _run_inputs(texts: list[str], inputs: dict[str, tuple[int, ...]], seed: int) -> dict:
    """``NAME=FILE.npy`` (or ``FILE.npy`` for a one-input network) per input; random (seeded,
    never zeros) for those not given."""
    from workbench.engine.base.errors import SessionError

    import numpy as np

    given = {}
    for text in texts:
        name, sep, path = text.rpartition("=")
        if not sep:
            if len(inputs) != 1:
                raise SessionError(f"--input {text!r}: write NAME=FILE.npy (inputs: {', '.join(inputs)})")
            name = next(iter(inputs))
        if not path.endswith(".npy"):
            raise SessionError(f"--input {text!r}: give a NumPy .npy file")
        given[name] = np.load(path)  # allow_pickle=False: data only
    rng = np.random.default_rng(seed)
    return {**{t: rng.uniform(-1.0, 1.0, s).astype("float32") for t, s in inputs.items() if t not in given}, **given}


def cmd_run(a: argparse.Namespace) -> int:
    import numpy as np

    from workbench.engine.build.standalone import load_network

    net = load_network(a.replay_dir)
    values = _run_inputs(a.input or [], net.inputs, a.seed)
    outs = net(**values)
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        net(**values)
        times.append((time.perf_counter() - t0) * 1e3)
    for t, v in outs.items():
        print(f"{t}: shape {tuple(v.shape)}, min {v.min():.4g}, mean {v.mean():.4g}, max {v.max():.4g}")
    if times:
        print(f"{net.name}: {float(np.median(times)):.4f} ms median over {len(times)} runs (min {min(times):.4f}; "
              f"{'network.so on the Relax VM' if net.engine == 'relax-vm' else 'kernels.so, kernel by kernel'})")
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix == ".npy" and len(outs) == 1:
            np.save(out, next(iter(outs.values())))
        elif out.suffix == ".npz":
            np.savez(out, **outs)
        else:
            from workbench.engine.base.errors import SessionError

            raise SessionError(f"--out {a.out}: give a .npz file (a .npy holds one output; this network has "
                               f"{len(outs)})" if out.suffix == ".npy" else f"--out {a.out}: give a .npy or .npz file")
        print(f"written to {out}")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from workbench.engine.session.export import export_session
    from workbench.engine.session.session import load

    bar, say = _bar(f"export {Path(a.session).name}")
    try:
        say("loading and validating the session")
        session = load(a.session)
        out = export_session(session, a.out, progress=say)
    finally:
        bar.close()
    manifest = json.loads((out / "manifest.json").read_text())
    for k in manifest["kernels"]:
        print(f"{k['name']:>28}: {k['latency_ms']:9.4f} ms  workload {k['workload_hash']}  ({k['schedule']})")
    print(f"MetaSchedule database (database_workload.json, database_tuning_record.json), session.json and "
          f"manifest.json written to {out}")
    return 0


def _follow(path: Path, bar: tqdm, stop: threading.Event) -> None:
    """Tail the tuning progress lines into the progress bar."""
    from .engine.tuning.progress import read_progress, summarize_progress

    while not stop.wait(0.5):
        rows = read_progress(path)
        bar.n = len(rows)
        bar.set_postfix_str(summarize_progress(rows).headline())  # per task, summed: not a pad's minimum
        bar.refresh()


def cmd_tune(a: argparse.Namespace) -> int:
    if a.stage == "expert":
        return _expert(a)
    from .engine.tuning import stages
    from workbench.engine.session.session import load, replay, save
    from .engine.tuning.options import TuneOptions
    from .engine.tuning.rpc import RpcConfig

    session = load(a.session)
    rpc = RpcConfig.parse(a.rpc) if a.rpc else None
    work = Path(a.work_dir or Path("work") / "tune" / session.name)
    work.mkdir(parents=True, exist_ok=True)
    progress = work / "progress.jsonl"
    options = TuneOptions(rpc=rpc, progress_path=progress, joint_fraction=a.joint_fraction, search=a.search,
                          keep_faster=not a.keep_tuned)
    if a.stage == "joint":  # the plan: each group of equal kernels, its share and the layouts it can score
        for share in stages.joint_shares(replay(session), a.budget, options):
            print(f"{share.op:>28}: {share.budget} measurements, {share.candidates} of {share.space} layout "
                  f"candidates" + (f"; its result also for {', '.join(share.twins)}" if share.twins else ""),
                  file=sys.stderr)
    bar = tqdm(total=a.budget, desc=f"tune {session.name} ({a.stage})", unit="meas", file=sys.stderr)
    stop = threading.Event()
    watcher = threading.Thread(target=_follow, args=(progress, bar, stop), daemon=True)
    watcher.start()
    profiler = None
    try:
        if a.profile:
            from tvm.s_tir.meta_schedule import Profiler

            with Profiler() as profiler:
                result = stages.tune_network(session, a.stage, a.budget, work, options)
        else:
            result = stages.tune_network(session, a.stage, a.budget, work, options)
    finally:
        stop.set()
        watcher.join()
        bar.close()
    if profiler is not None:
        print(cost_breakdown({str(k): float(getattr(v, "value", v)) for k, v in profiler.get().items()}, a.budget))
    out = Path(a.out) if a.out else Path(a.session).with_name(f"{Path(a.session).stem}_tuned.json")
    tuned = result.session
    save(tuned, out)
    new = tuned.steps[len(session.steps):]
    for target in dict.fromkeys(s.target for s in new):
        print(f"{target:>28}: {_what_tuning_did([s for s in new if s.target == target])}")
    for line in result.summary():
        print(line)
    print(f"tuned session written to {out}")
    return 0


def _what_tuning_did(steps: list) -> str:
    """One line for the steps a tuning added to one kernel or op."""
    tuned = [s for s in steps if s.kind == "tuned"]
    if tuned:
        ms = tuned[-1].get("latency_ms")
        return (f"{ms:9.4f} ms" if ms is not None else "   (not measured)") + f" ({tuned[-1].get('stage')})"
    loops = [s for s in steps if s.kind == "loop"]
    if loops:
        return f"{len(loops)} loop steps (its expert or analytic schedule: the tuned one did not apply or was wrong)"
    return "layout " + ", ".join(s.primitive for s in steps)


def cost_breakdown(seconds: dict[str, float], measurements: int, top: int = 12) -> str:
    """MetaSchedule's profiler scopes as a table: seconds, share of the total, seconds per
    measurement (the search's scopes, the builder's and the runner's waits, ...).

    >>> print(cost_breakdown({"Total": 10.0, "EvoSearch": 8.0, "SendToRunner": 1.0}, 5))
    where a measurement's time goes (MetaSchedule's profiler, 5 measurements, 10.0 s):
                                  EvoSearch     8.00 s   80.0%   1.600 s/measurement
                               SendToRunner     1.00 s   10.0%   0.200 s/measurement
    """
    total = seconds.get("Total") or max(seconds.values(), default=0.0) or 1.0
    rows = sorted(((k, v) for k, v in seconds.items() if k != "Total"), key=lambda kv: -kv[1])[:top]
    lines = [f"where a measurement's time goes (MetaSchedule's profiler, {measurements} measurements, {total:.1f} s):"]
    lines += [f"{k:>43} {v:8.2f} s {100 * v / total:6.1f}% {v / max(1, measurements):7.3f} s/measurement"
              for k, v in rows]
    return "\n".join(lines)


def _expert(a: argparse.Namespace) -> int:
    """``tune --stage expert``: no measurement, every complex kernel on its expert schedule."""
    from workbench.engine.session.session import load_state, save

    state = load_state(a.session)
    expert = state.with_expert_schedules()
    out = Path(a.out) if a.out else Path(a.session).with_name(f"{Path(a.session).stem}_expert.json")
    save(expert, out)
    print(f"{len(expert.session.steps) - len(state.session.steps)} expert loop steps on "
          f"{len({s.target for s in expert.session.steps[len(state.session.steps):]})} kernels; session written to {out}")
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from workbench.bench import suite as bench

    if a.suite == "networks":
        return _bench_networks(a)
    if a.suite == "conversions":
        return _bench_conversions(a)
    suite = bench.load_suite(a.suite)
    if a.only:
        names = set(a.only.split(","))
        suite = [w for w in suite if w.name in names]
        if not suite:
            raise WorkbenchError(f"--only matched no workload of {a.suite}")
    out = Path(a.out)
    target = _target(a.target) or dict(DEFAULT_TARGET)
    if a.budget < 0:
        raise WorkbenchError(f"--budget must be 0 (the expert schedules alone, no tuning) or more, got {a.budget}")
    bar = tqdm(total=len(suite) * (4 if a.budget else 1), desc="bench", file=sys.stderr)

    def step(msg: str) -> None:
        bar.set_postfix_str(msg)
        bar.update(1)

    if a.retime:
        from workbench.bench.retime import retime

        bar.total = len(suite) * 2
        rows = retime(Path(a.retime), suite, out, target, on_step=step)
        bar.close()
        print((out / "results.md").read_text())
        return 0 if all(r.verified for r in rows) else 1
    if a.search_study:
        bar.total = len(suite) * 2 * a.seeds
        bench.search_study(suite, a.search_study, out, target, seeds=tuple(range(a.seeds)), on_step=step)
        bar.close()
        print((out / "search.md").read_text())
        return 0
    rows = bench.run_bench(suite, a.budget, out, target, search=a.search, on_step=step)
    bar.close()
    from .viz.tuning import tuning_curves_figure

    for name, tuners in bench.curves(out).items():
        tuning_curves_figure(tuners, title=f"{name}: best latency against measurements").write_html(
            out / f"curves_{name}.html", include_plotlyjs="cdn")
    print((out / "results.md").read_text())
    return 0 if all(r.verified for r in rows) else 1


def _chosen(text: str | None, known: tuple[str, ...], flag: str, what: str) -> tuple[str, ...]:
    """The comma-separated names of ``text`` (all of ``known`` when not given); an unknown one is
    refused with the known ones."""
    names = tuple(text.split(",")) if text else known
    if unknown := [n for n in names if n not in known]:
        raise WorkbenchError(f"{flag}: no {what} {unknown[0]!r}; the {what}s: {', '.join(known)}")
    return names


def _bench_conversions(a: argparse.Namespace) -> int:
    """``bench --suite conversions``: layout conversions beyond the LLC against a copy (``engine.convbench``)."""
    from workbench.bench import conversions as convbench

    known = {c.name: c for c in convbench.CASES}
    cases = tuple(known[n] for n in _chosen(a.only, tuple(known), "--only", "case"))
    out = Path(a.out)
    bar = tqdm(desc="bench conversions", file=sys.stderr)
    rows = convbench.run_conversion_bench(cases, out, _target(a.target) or dict(DEFAULT_TARGET),
                                          on_step=lambda msg: (bar.set_postfix_str(msg), bar.update(1)))
    bar.close()
    print((out / "conversions.md").read_text())
    return 0 if all(r["verified"] for r in rows) else 1


def _budgets(text: str) -> list[int]:
    """``--budgets 64,256`` as positive whole numbers."""
    try:
        budgets = [int(b) for b in text.split(",")]
    except ValueError:
        budgets = []
    if not budgets or min(budgets) < 1:
        raise WorkbenchError(f"--budgets takes comma-separated positive numbers of measurements, got {text!r}")
    return budgets


def _bench_networks(a: argparse.Namespace) -> int:
    """``bench --suite networks``: the built-in networks end to end (``engine.netbench``)."""
    from workbench.bench import networks as netbench

    names = _chosen(a.only, netbench.NETWORK_NAMES, "--only", "network")
    out = Path(a.out)
    budgets = tuple(_budgets(a.budgets)) if a.budgets else a.budget
    contenders = _chosen(a.contenders, netbench.CONTENDERS, "--contenders", "contender")
    steps = 3 + len(set(contenders) - {"torch"})  # PyTorch, each other contender, the rounds, memory and profiles
    bar = tqdm(total=len(names) * steps * (len(budgets) if isinstance(budgets, tuple) else 1), desc="bench networks",
               file=sys.stderr)

    def step(msg: str) -> None:
        bar.set_postfix_str(msg)
        bar.update(1)

    rows = netbench.run_network_bench(names, budgets, out, _target(a.target) or dict(DEFAULT_TARGET), on_step=step,
                                      contenders=contenders)
    bar.close()
    print((out / "networks.md").read_text())
    errors = [f"{r['network']} {k[:-6]}: {v}" for r in rows for k, v in r.items() if k.endswith("_error")]
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    ours = "ours" in contenders  # without it there is no output of ours to check
    bad = [r["network"] for r in rows if ours and "ours_error" not in r  # a failure is printed above
           and (r["max_abs_err"] is None or r["max_abs_err"] > 1e-4 * max(1.0, r["reference_max_abs"]))]
    for name in bad:
        print(f"error: {name}: ours differs from PyTorch", file=sys.stderr)
    return 0 if not errors and not bad else 1


def cmd_ceilings(a: argparse.Namespace) -> int:
    from workbench.engine.measure import ceilings

    target = _target(a.target) or dict(DEFAULT_TARGET)
    print(ceilings.format_ceilings(ceilings.get_ceilings(target, refresh=True)))
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    """Import a model file (or export a factory's module to OUT.pt2 first) into a new session."""
    from workbench.engine.models import zoo
    from workbench.engine.models.frontend import FORMATS, export_factory, parse_input
    from workbench.engine.session.session import new_session, safe_path, save

    inputs = dict(parse_input(t) for t in a.input or [])
    if a.name:
        safe_path(".", a.name)  # refuse a name a session file cannot have
    out, model, origin = Path(a.out), a.model, None
    if Path(model).suffix.lower() not in FORMATS and not Path(model).exists():
        import torch

        origin, model = model, str(out.with_suffix(".pt2"))  # replay reads the file, never runs the factory
        program = export_factory(origin, inputs)
        out.parent.mkdir(parents=True, exist_ok=True)
        torch.export.save(program, model)
        inputs = {}
    try:
        spec, graph = zoo.file_model(model, inputs, origin)
    except WorkbenchError:
        if origin:
            Path(model).unlink(missing_ok=True)
        raise
    session = new_session(spec, a.name or None, _target(a.target))
    save(session, out)
    kinds: dict[str, int] = {}
    for n in graph.nodes:
        kinds[n.label] = kinds.get(n.label, 0) + 1
    print(f"imported {Path(model).name}: {len(graph.nodes)} ops ({', '.join(f'{k} {v}' for k, v in kinds.items())})")
    print(f"inputs: {', '.join(f'{t}={tuple(graph.tensors[t].shape)}' for t in graph.inputs)}; "
          f"outputs: {', '.join(f'{t}={tuple(graph.tensors[t].shape)}' for t in graph.outputs)}")
    print(f"session {session.name} written to {out}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench", description="ALT Workbench without a browser.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    r = sub.add_parser("replay", help="rebuild a session's final kernels, verify and time them",
                       description="Load SESSION (validated by replaying it), build its scheduled program, verify "
                                   "it against the reference on random inputs and time each kernel. Writes "
                                   "DIR/kernels.so, DIR/program.py, DIR/report.json and the runnable network "
                                   "(DIR/network.so, one Relax VM module plain TVM runs; DIR/network.json, "
                                   "DIR/constants.npz: `run DIR`). Exit status: 0 when every "
                                   "output matched, 1 when one did not, 2 on an error.")
    r.add_argument("session", help="a session file (see docs/session-format.md)")
    r.add_argument("--out", metavar="DIR", help="output folder (default work/replay/NAME)")
    r.add_argument("--target", metavar="JSON", help='a TVM target as JSON, e.g. \'{"kind": "llvm", "num-cores": 2}\' '
                   "(default: the session's)")
    r.set_defaults(fn=cmd_replay)
    n = sub.add_parser("run", help="run a replayed network on inputs from .npy files",
                       description="Run the whole graph that `replay` wrote to REPLAY_DIR (network.so on the Relax "
                                   "VM; in an older folder, kernels.so kernel by kernel) on the given inputs (random "
                                   "ones for those not given), print each output's summary and the run's latency, "
                                   "and save the outputs.")
    n.add_argument("replay_dir", metavar="REPLAY_DIR")
    n.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="an input's values (FILE.npy alone for a one-input network; repeatable)")
    n.add_argument("--out", metavar="FILE", help="outputs: FILE.npy (one output) or FILE.npz (by output name)")
    n.add_argument("--seed", type=int, default=0, help="seed of the random inputs not given")
    n.add_argument("--repeat", type=int, default=10, help="timed runs after the first (0: no timing)")
    n.set_defaults(fn=cmd_run)
    e = sub.add_parser("export", help="write a session as a MetaSchedule tuning record",
                       description="Write DIR/database_workload.json and DIR/database_tuning_record.json (a "
                                   "MetaSchedule JSONDatabase: one workload per kernel, its schedule trace as the "
                                   "record), DIR/session.json and DIR/manifest.json.")
    e.add_argument("session")
    e.add_argument("--out", metavar="DIR", required=True)
    e.set_defaults(fn=cmd_export)
    t = sub.add_parser("tune", help="auto-tune a session (joint layout+loop, or loop-only)")
    t.add_argument("session")
    t.add_argument("--stage", choices=["joint", "loop", "expert"], default="joint",
                   help="joint: layouts and loops; loop: loops on the session's layouts; expert: no measurement, "
                        "every complex kernel on its analytic expert schedule (loop steps you can edit)")
    t.add_argument("--budget", type=int, default=64, help="hardware measurements in all")
    t.add_argument("--rpc", help="measure through a TVM RPC tracker: HOST:PORT:KEY")
    t.add_argument("--joint-fraction", type=float, default=0.3, help="share of the budget for the joint stage")
    t.add_argument("--keep-tuned", action="store_true",
                   help="keep the tuned network without timing it against its seeds and its start")
    t.add_argument("--search", choices=["model", "random"], default="model")
    t.add_argument("--work-dir", help="MetaSchedule databases and progress (default work/tune/NAME)")
    t.add_argument("--out", help="tuned session file (default SESSION_tuned.json)")
    t.add_argument("--profile", action="store_true",
                   help="print where the time went (search, build, run: MetaSchedule's profiler scopes)")
    t.set_defaults(fn=cmd_tune)
    b = sub.add_parser("bench", help="joint tuner vs MetaSchedule vs PyTorch on single operators")
    b.add_argument("--suite", default="benchmarks/suite.json",
                   help="a suite of single operators (JSON), 'conversions': layout conversions beyond the "
                        "last-level cache against a copy, or 'networks': ResNet-18, MobileNet-V2 and a BERT "
                        "encoder layer end to end against OpenVINO, ONNX Runtime, torch.compile, PyTorch and TVM's "
                        "Relax pipeline (untuned and MetaSchedule)")
    b.add_argument("--budget", type=int, default=64,
                   help="measurements per tuner per workload; 0: no tuning, the expert schedules alone against "
                        "PyTorch and NumPy")
    b.add_argument("--budgets", metavar="B1,B2", help="with --suite networks: several budgets in one run, e.g. 64,256 "
                                                      "(each tuning seeded by the smaller budgets' networks)")
    b.add_argument("--only", help="comma-separated workload (or conversion case, or network) names")
    b.add_argument("--contenders", help="with --suite networks: comma-separated contenders to run (PyTorch always "
                                        "runs): ours,torch,torch_compile,openvino,onnxruntime,tvm_untuned,"
                                        "tvm_metaschedule (all by default)")
    b.add_argument("--search", choices=["model", "random"], default="model")
    b.add_argument("--target")
    b.add_argument("--search-study", type=int, metavar="BUDGET",
                   help="instead: the joint stage alone, cost-model-guided vs random search, at this budget")
    b.add_argument("--seeds", type=int, default=3, help="seeds per workload of the search study (0, 1, ...)")
    b.add_argument("--retime", metavar="RUN", help="instead: no tuning, the kernels of the finished suite run in "
                   "folder RUN rebuilt from its databases and timed again with every baseline, interleaved "
                   "(for a run whose rounds a busy machine disturbed); results to --out")
    b.add_argument("--out", default=f"benchmarks/results/{time.strftime('%Y-%m-%d')}")
    b.set_defaults(fn=cmd_bench)
    c = sub.add_parser("ceilings", help="measure and print this machine's compute and bandwidth ceilings")
    c.add_argument("--target")
    c.set_defaults(fn=cmd_ceilings)
    i = sub.add_parser("import", help="import an ONNX / torch.export model, expression ops (.expr) or a Python "
                                      "factory into a session",
                       description="Import MODEL (a .onnx or .pt2 file; a .expr file of expression ops, one "
                                   "`NAME: out[i, ...] = ...` or `input NAME[D1, ...]` per line; or package.module:"
                                   "function returning a torch.nn.Module, exported to OUT.pt2 beside the session) "
                                   "and write a session "
                                   "on it. The session pins the file by its SHA-256: replaying it after the file "
                                   "changed is refused. Exit status 2 when the model cannot be imported.")
    i.add_argument("model", help="a .onnx, .pt2 or .expr file, or package.module:function")
    i.add_argument("--out", metavar="SESSION.json", required=True, help="the session file to write")
    i.add_argument("--input", action="append", metavar="NAME=D1,D2,...",
                   help="an input's static shape, e.g. data=1,3,224,224 (needed for dynamic dims; repeatable)")
    i.add_argument("--name", help="session name (default: the model file's name)")
    i.add_argument("--target", metavar="JSON", help="a TVM target as JSON (default: this machine's)")
    i.set_defaults(fn=cmd_import)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an unreadable or unwritable path the user gave
        where = f" {e.filename}" if e.filename else ""
        print(f"error: cannot access{where}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def _exit(code: int | None) -> None:
    """Exit with ``code``; at once (``os._exit``, output flushed) while a candidate's build that
    timed out still runs on its thread: LLVM's static destructors at a normal exit would run under it."""
    runner = sys.modules.get("workbench.engine.tuning.runner")
    if runner is not None and runner.builds_left_running():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)
    sys.exit(code)


if __name__ == "__main__":
    _exit(main())
