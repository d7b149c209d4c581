"""The command line: ``python -m workbench replay|export|tune|bench|ceilings ...``.

It calls the same engine functions as the app. User errors print one line on stderr and
exit with status 2; a replay whose outputs do not match the reference exits with 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from .engine.errors import WorkbenchError


def _bar(desc: str) -> tuple[tqdm, Callable[[str], None]]:
    bar = tqdm(desc=desc, bar_format="{desc}: {postfix} [{elapsed}]", file=sys.stderr)
    return bar, lambda msg: (bar.set_postfix_str(msg), bar.refresh())


def _target(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        t = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkbenchError(f"--target must be a JSON object such as '{{\"kind\": \"llvm\", \"num-cores\": 2}}': {e}")
    if not isinstance(t, dict):
        raise WorkbenchError("--target must be a JSON object")
    return t


def cmd_replay(a: argparse.Namespace) -> int:
    from .engine.replay import replay_to
    from .engine.session import load

    session = load(a.session)
    out = Path(a.out or Path("work") / "replay" / session.name)
    bar, say = _bar(f"replay {session.name}")
    report = replay_to(session, out, _target(a.target), progress=say)
    bar.close()
    for k in report.kernels:
        print(f"{k['name']:>28}: {k['latency_ms']:9.4f} ms  {k['gflops']:8.2f} GFLOP/s")
    print(f"{'total':>28}: {report.total_ms:9.4f} ms; max rel error {report.max_rel_error:.2e}; "
          f"ok: {report.ok}; written to {out}")
    if not report.ok:
        print(f"error: outputs differ from the reference (max relative error {report.max_rel_error:.2e})",
              file=sys.stderr)
        return 1
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from .engine.export import export_session
    from .engine.session import load

    out = export_session(load(a.session), a.out)
    print(f"MetaSchedule database, session and manifest written to {out}")
    return 0


def _follow(path: Path, bar: tqdm, stop: threading.Event) -> None:
    """Tail the tuning progress lines into the progress bar."""
    from .engine.metaschedule import read_progress

    while not stop.wait(0.5):
        rows = read_progress(path)
        bests = [r["best_ms"] for r in rows if r.get("best_ms") is not None]
        bar.n = len(rows)
        bar.set_postfix_str(f"best {min(bests):.4f} ms" if bests else "no result yet")
        bar.refresh()


def cmd_tune(a: argparse.Namespace) -> int:
    from .engine.metaschedule import RpcConfig
    from .engine.session import load, save
    from .engine.tune import tune_session

    session = load(a.session)
    rpc = RpcConfig.parse(a.rpc) if a.rpc else None
    work = Path(a.work_dir or Path("work") / "tune" / session.name)
    work.mkdir(parents=True, exist_ok=True)
    progress = work / "progress.jsonl"
    bar = tqdm(total=a.budget, desc=f"tune {session.name} ({a.stage})", unit="meas", file=sys.stderr)
    stop = threading.Event()
    watcher = threading.Thread(target=_follow, args=(progress, bar, stop), daemon=True)
    watcher.start()
    try:
        tuned = tune_session(session, a.stage, a.budget, work, rpc=rpc, progress_path=progress,
                             joint_fraction=a.joint_fraction, search=a.search)
    finally:
        stop.set()
        watcher.join()
        bar.close()
    out = Path(a.out) if a.out else Path(a.session).with_name(f"{Path(a.session).stem}_tuned.json")
    save(tuned, out)
    for act in tuned.actions[len(session.actions):]:
        print(f"{act['op']:>28}: {act.get('latency_ms', float('nan')):9.4f} ms ({act.get('stage')})")
    print(f"tuned session written to {out}")
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from .engine.bench import curves, load_suite, run_bench
    from .viz.tuning import tuning_curves_figure

    suite = load_suite(a.suite)
    if a.only:
        names = set(a.only.split(","))
        suite = [w for w in suite if w.name in names]
        if not suite:
            raise WorkbenchError(f"--only matched no workload of {a.suite}")
    out = Path(a.out)
    target = _target(a.target) or {"kind": "llvm", "num-cores": 2}
    bar = tqdm(total=len(suite) * 3, desc="bench", file=sys.stderr)

    def step(msg: str) -> None:
        bar.set_postfix_str(msg)
        bar.update(1)

    if a.search_study:
        from .engine.bench import search_study

        bar.total = len(suite) * 4
        search_study(suite, a.search_study, out, target, on_step=step)
        bar.close()
        print((out / "search.md").read_text())
        return 0
    rows = run_bench(suite, a.budget, out, target, search=a.search, on_step=step)
    bar.close()
    for name, tuners in curves(out).items():
        tuning_curves_figure(tuners, title=f"{name}: best latency against measurements").write_html(
            out / f"curves_{name}.html", include_plotlyjs="cdn")
    print((out / "results.md").read_text())
    return 0 if all(r.verified for r in rows) else 1


def cmd_ceilings(a: argparse.Namespace) -> int:
    from .engine.ceilings import format_ceilings, get_ceilings

    print(format_ceilings(get_ceilings(_target(a.target) or {"kind": "llvm", "num-cores": 2}, refresh=True)))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench", description="ALT Workbench without a browser.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("replay", help="rebuild a session's final kernels, verify and time them")
    r.add_argument("session")
    r.add_argument("--out", help="output folder (default work/replay/NAME)")
    r.add_argument("--target", help='a TVM target as JSON, e.g. \'{"kind": "llvm", "num-cores": 2}\'')
    r.set_defaults(fn=cmd_replay)
    e = sub.add_parser("export", help="write a session as a MetaSchedule tuning record")
    e.add_argument("session")
    e.add_argument("--out", required=True)
    e.set_defaults(fn=cmd_export)
    t = sub.add_parser("tune", help="auto-tune a session (joint layout+loop, or loop-only)")
    t.add_argument("session")
    t.add_argument("--stage", choices=["joint", "loop"], default="joint")
    t.add_argument("--budget", type=int, default=64, help="hardware measurements in all")
    t.add_argument("--rpc", help="measure through a TVM RPC tracker: HOST:PORT:KEY")
    t.add_argument("--joint-fraction", type=float, default=0.3, help="share of the budget for the joint stage")
    t.add_argument("--search", choices=["model", "random"], default="model")
    t.add_argument("--work-dir", help="MetaSchedule databases and progress (default work/tune/NAME)")
    t.add_argument("--out", help="tuned session file (default SESSION_tuned.json)")
    t.set_defaults(fn=cmd_tune)
    b = sub.add_parser("bench", help="joint tuner vs MetaSchedule vs PyTorch on single operators")
    b.add_argument("--suite", default="benchmarks/suite.json")
    b.add_argument("--budget", type=int, default=64)
    b.add_argument("--only", help="comma-separated workload names")
    b.add_argument("--search", choices=["model", "random"], default="model")
    b.add_argument("--target")
    b.add_argument("--search-study", type=int, metavar="BUDGET",
                   help="instead: the joint stage alone, cost-model-guided vs random search, at this budget")
    b.add_argument("--out", default=f"benchmarks/results/{time.strftime('%Y-%m-%d')}")
    b.set_defaults(fn=cmd_bench)
    c = sub.add_parser("ceilings", help="measure and print this machine's compute and bandwidth ceilings")
    c.add_argument("--target")
    c.set_defaults(fn=cmd_ceilings)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
