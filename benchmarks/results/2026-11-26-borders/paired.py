"""Paired: da2847b's vs the working tree's conversion steps, each kernel timed in turn with the
other (and, for the conversion benchmark's cases, with a copy of the same bytes); only kernels
whose steps differ. The conversion benchmark's cases, then the suite's workloads x presets at
batch 1 (the conversions a single op pays).
usage: PYTHONPATH=. python benchmarks/results/2026-11-26-borders/paired.py ROUNDS [--mcpu X]"""
import sys, math
import numpy as np
import workbench.engine.schedules.conversion.steps as new
from benchmarks.paired_setup import old_convert, target_and_args, timed_in_turn
from workbench.bench.conversions import CASES, case_conversions
from workbench.engine.base.errors import LayoutError
from workbench.bench.suite import load_suite, workload_graph
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import PRESETS, preset_actions
from workbench.engine.build.program import make_program
old = old_convert("da2847b")  # the schedule before the borders were cut
T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
funcs = [(case.name, k, raw, True) for case in CASES for k, raw, _ in case_conversions(case, T)]
for w in load_suite("benchmarks/suite.json"):
    g, op = workload_graph(w)
    for preset in PRESETS:
        try:
            prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, preset, op)))
        except (LayoutError, ValueError, KeyError):
            continue  # the preset does not fit this workload
        funcs += [(f"{w.name}/{preset}", k, f, False) for k, f in prog.funcs.items() if k.startswith("convert")]
for name, k, raw, with_copy in funcs:
    so, sn = old.conversion_steps(raw, k, T), new.conversion_steps(raw, k, T)
    if so == sn:
        continue
    s = timed_in_turn(raw, {"old": so, "new": sn}, T, ROUNDS, copy=with_copy)
    ratio = [o / n for o, n in zip(s["old"], s["new"])]
    nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
    pct = "".join(f" {label} {np.median([100 * c / v for c, v in zip(s['copy'], s[label])]):.0f}% of copy"
                  for label in ("old", "new")) if with_copy else ""
    print(f"{name:22s} {k:18s} {nbytes/1e6:7.2f}MB old {np.median(s['old'])*1e3:9.1f}us new {np.median(s['new'])*1e3:9.1f}us "
          f"old/new {np.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}){pct}", flush=True)
