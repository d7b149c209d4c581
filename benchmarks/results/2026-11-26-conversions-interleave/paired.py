"""Paired: an older commit's conversion steps (--rev=REV, default HEAD) vs the working tree's, on the suite x presets
(batch 1) and the conversion bench's cases; each changed kernel checked against its unscheduled kernel and timed
in turn with a copy. usage: PYTHONPATH=. python paired.py ROUNDS [--mcpu X] [--rev=REV] [--only-list]"""
import sys, math
sys.path.insert(0, "benchmarks")
import numpy as np
import workbench.engine.schedules.conversion.steps as new
from paired_setup import old_convert, target_and_args, timed_in_turn
from workbench.bench.conversions import CASES, case_conversions
from workbench.bench.suite import load_suite, workload_graph
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program
REV = next((a.split("=")[1] for a in sys.argv if a.startswith("--rev=")), "HEAD"); sys.argv = [a for a in sys.argv if not a.startswith("--rev=")]
old = old_convert(REV)
T, args = target_and_args(sys.argv[1:])
LIST = "--only-list" in args; args = [a for a in args if a != "--only-list"]
ROUNDS = int(args[0])
funcs = []
for w in load_suite("benchmarks/suite.json"):
    g, op = workload_graph(w)
    for preset in ("alt_tiled", "default", "blocked", "channels_last", "nkn"):
        try:
            prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, preset, op)))
        except Exception:
            continue
        funcs += [(f"{w.name}/{preset}", k, f) for k, f in prog.funcs.items() if k.startswith("convert")]
for case in CASES:
    funcs += [(case.name, k, raw) for k, raw, _ in case_conversions(case, T)]
print(len(funcs), "conversion kernels", flush=True)
for name, k, raw in funcs:
    so, sn = old.conversion_steps(raw, k, T), new.conversion_steps(raw, k, T)
    if so == sn:
        continue
    print("changed:", name, k, len(so), "->", len(sn), "steps", flush=True)
    if LIST:
        continue
    s = timed_in_turn(raw, {"old": so, "new": sn}, T, ROUNDS, copy=True)
    nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
    ratio = [o / n for o, n in zip(s["old"], s["new"])]
    pc = {l: np.median([100 * c / v for c, v in zip(s["copy"], s[l])]) for l in ("old", "new")}
    print(f"  {nbytes/1e6:6.2f}MB old {np.median(s['old'])*1e3:8.1f}us ({pc['old']:.0f}% of copy) new {np.median(s['new'])*1e3:8.1f}us "
          f"({pc['new']:.0f}%) old/new {np.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})", flush=True)
