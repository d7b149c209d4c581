"""``tune``: a session auto-tuned (joint layout and loops, loops alone, or the expert schedules
without measuring), its progress followed on a status bar."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from tqdm import tqdm


def register(sub: argparse._SubParsersAction) -> None:
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
    t.add_argument("--cold", action="store_true", help="time candidates with all but their first argument (their "
                   "weights) flushed from the CPU caches, one call a time, as inside a network")
    t.add_argument("--work-dir", help="MetaSchedule databases and progress (default work/tune/NAME)")
    t.add_argument("--out", help="tuned session file (default SESSION_tuned.json)")
    t.add_argument("--profile", action="store_true",
                   help="print where the time went (search, build, run: MetaSchedule's profiler scopes)")
    t.set_defaults(fn=cmd_tune)


def _follow(path: Path, bar: tqdm, stop: threading.Event) -> None:
    """Tail the tuning progress lines into the progress bar."""
    from workbench.engine.tuning.progress import read_progress, summarize_progress

    while not stop.wait(0.5):
        rows = read_progress(path)
        bar.n = len(rows)
        bar.set_postfix_str(summarize_progress(rows).headline())  # per task, summed: not a pad's minimum
        bar.refresh()


def cmd_tune(a: argparse.Namespace) -> int:
    if a.stage == "expert":
        return _expert(a)
    from workbench.engine.session.session import load, replay, save
    from workbench.engine.tuning import stages
    from workbench.engine.tuning.options import TuneOptions
    from workbench.engine.tuning.rpc import RpcConfig

    session = load(a.session)
    rpc = RpcConfig.parse(a.rpc) if a.rpc else None
    work = Path(a.work_dir or Path("work") / "tune" / session.name)
    work.mkdir(parents=True, exist_ok=True)
    progress = work / "progress.jsonl"
    options = TuneOptions(rpc=rpc, progress_path=progress, joint_fraction=a.joint_fraction, search=a.search,
                          keep_faster=not a.keep_tuned, cold=a.cold)
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

