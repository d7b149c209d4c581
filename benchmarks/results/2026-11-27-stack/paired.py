"""Paired: every expert and conversion kernel of the suite x 5 layout presets built through our
TIR pipeline without ``SmallBuffersOnStack`` (before) and with it (now), only where the pass
changes an allocation; each pair checked equal on random data and timed in turn.
usage: PYTHONPATH=. python benchmarks/results/2026-11-27-stack/paired.py ROUNDS [--mcpu X]"""
import sys

import numpy as np

from benchmarks.paired_setup import stack_moves, stack_timers, target_and_args
from workbench.bench.suite import load_suite, workload_graph
from workbench.engine.layout.book import LayoutBook
from workbench.engine.schedules.expert import expert_steps
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.layout.keys import apply_actions
from workbench.engine.loops.primitives import apply_steps
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import use_all_cores

T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
use_all_cores()
rng, ratios = np.random.default_rng(0), []
for w in load_suite("benchmarks/suite.json"):
    g, op = workload_graph(w)
    for preset in ("default", "alt_tiled", "blocked", "channels_last", "nkn"):
        try:
            book = LayoutBook() if preset == "default" else apply_actions(g, LayoutBook(), preset_actions(g, preset, op))
            prog = make_program(g, book)
        except Exception:  # noqa: BLE001 - a preset that does not apply to this op
            continue
        for k, f in prog.funcs.items():
            func = apply_steps(f, expert_steps(f, k, T)).mod["main"]
            if not stack_moves(func, T):
                continue
            s = interleaved_samples(stack_timers(func, T, rng), ROUNDS)
            r = [p / q for p, q in zip(s["before"], s["now"])]
            ratios.append(float(np.median(r)))
            print(f"| {w.name} | {preset} | {k} | {np.median(s['before']) * 1e3:.1f} | {np.median(s['now']) * 1e3:.1f} "
                  f"| {np.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |", flush=True)
print("geomean before/now", round(float(np.exp(np.mean(np.log(ratios)))), 3), "over", len(ratios), "kernels")
