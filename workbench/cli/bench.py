"""``bench`` (single operators, layout conversions, whole networks, or a retime of a finished run)
and ``ceilings`` (this machine's compute and bandwidth ceilings)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

from workbench.cli.common import parse_target
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.build.targets import DEFAULT_TARGET


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="joint tuner vs MetaSchedule vs PyTorch on single operators")
    b.add_argument("--suite", default="benchmarks/suite.json",
                   help="a suite of single operators (JSON), 'conversions': layout conversions beyond the "
                        "last-level cache against a copy, or 'networks': ResNet-18, MobileNet-V2, a BERT "
                        "encoder layer and a Llama decoder layer (prefill, decode) end to end against OpenVINO, ONNX Runtime, torch.compile, PyTorch and TVM's "
                        "Relax pipeline (untuned and MetaSchedule), or 'training': a training step (forward, backward, "
                        "SGD update) of the expression-op examples against PyTorch eager and torch.compile")
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
    b.add_argument("--cold", action="store_true", help="with --suite networks: our tuning times candidates with "
                   "their weights flushed from the caches, as in a network (tune --cold)")
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


def cmd_bench(a: argparse.Namespace) -> int:
    from workbench.bench import suite as bench

    if a.suite == "networks":
        return _bench_networks(a)
    if a.cold:
        raise WorkbenchError("--cold applies to --suite networks only")
    if a.suite == "conversions":
        return _bench_conversions(a)
    if a.suite == "training":
        return _bench_training(a)
    suite = bench.load_suite(a.suite)
    if a.only:
        names = set(a.only.split(","))
        suite = [w for w in suite if w.name in names]
        if not suite:
            raise WorkbenchError(f"--only matched no workload of {a.suite}")
    out = Path(a.out)
    target = parse_target(a.target) or dict(DEFAULT_TARGET)
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
    from workbench.viz.tuning import tuning_curves_figure

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
    """``bench --suite conversions``: layout conversions beyond the LLC against a copy (``bench.conversions``)."""
    from workbench.bench import conversions as convbench

    known = {c.name: c for c in convbench.CASES}
    cases = tuple(known[n] for n in _chosen(a.only, tuple(known), "--only", "case"))
    out = Path(a.out)
    bar = tqdm(desc="bench conversions", file=sys.stderr)
    rows = convbench.run_conversion_bench(cases, out, parse_target(a.target) or dict(DEFAULT_TARGET),
                                          on_step=lambda msg: (bar.set_postfix_str(msg), bar.update(1)))
    bar.close()
    print((out / "conversions.md").read_text())
    return 0 if all(r["verified"] for r in rows) else 1


def _bench_training(a: argparse.Namespace) -> int:
    """``bench --suite training``: a training step of the expression-op examples (``bench.training``)."""
    from workbench.bench import training as trainbench

    names = _chosen(a.only, trainbench.EXAMPLE_NAMES, "--only", "model")
    out = Path(a.out)
    bar = tqdm(total=2 * len(names), desc="bench training", file=sys.stderr)
    rows = trainbench.run_training_bench(names, out, parse_target(a.target) or dict(DEFAULT_TARGET),
                                         on_step=lambda msg: (bar.set_postfix_str(msg), bar.update(1)))
    bar.close()
    print((out / "training.md").read_text())
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
    """``bench --suite networks``: the built-in networks end to end (``bench.networks``)."""
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

    rows = netbench.run_network_bench(names, budgets, out, parse_target(a.target) or dict(DEFAULT_TARGET), on_step=step,
                                      contenders=contenders, cold=a.cold)
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

    target = parse_target(a.target) or dict(DEFAULT_TARGET)
    print(ceilings.format_ceilings(ceilings.get_ceilings(target, refresh=True)))
    return 0
