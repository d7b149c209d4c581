"""Paired: 59150aa's vs the working tree's conversion steps on the suite's workloads x alt_tiled
(batch 1, as the single-op benchmark pays them), each timed in turn; plus extra ConversionCases.
usage: PYTHONPATH=. python benchmarks/results/2026-11-26-piece-tiles/tr_suite.py ROUNDS [--mcpu X]"""
import sys, math
import numpy as np
import workbench.engine.schedules.conversion.steps as new
from benchmarks.paired_setup import old_convert, target_and_args
from workbench.bench.conversions import ConversionCase, case_conversions, _compile, _random_args
from workbench.engine.loops.primitives import apply_steps
from workbench.bench.suite import call_timer, load_suite, workload_graph
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program
old = old_convert("59150aa")  # the schedule before a8f9e76
T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
funcs = []
for w in load_suite("benchmarks/suite.json"):
    g, op = workload_graph(w)
    try:
        prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", op)))
    except Exception:
        continue
    funcs += [(w.name, k, f) for k, f in prog.funcs.items() if k.startswith("convert")]
for case in [ConversionCase("alt_3x3_7x14_b8", (8, 64, 56, 56), 64, 3, 1, 1, "alt_tiled", {"tiles": [7, 14]})]:
    funcs += [(case.name, k, raw) for k, raw, _ in case_conversions(case, T)]
rng = np.random.default_rng(0)
for name, k, raw in funcs:
    so, sn = old.conversion_steps(raw, k, T), new.conversion_steps(raw, k, T)
    if so == sn:
        continue
    want = _random_args(raw, rng); _compile(raw, T)(*want)
    timers = {}
    for label, st in (("old", so), ("new", sn)):
        f = apply_steps(raw, st).mod["main"]
        fn = _compile(f, T); a = _random_args(f, rng); a[0] = want[0]; fn(*a)
        assert np.array_equal(a[-1].numpy(), want[-1].numpy()), (name, k, label)
        timers[label] = call_timer(lambda fn=fn, a=a: fn(*a))
    s = interleaved_samples(timers, ROUNDS)
    ratio = [o / n for o, n in zip(s["old"], s["new"])]
    nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
    print(f"{name:16s} {k:18s} {nbytes/1e6:6.2f}MB old {np.median(s['old'])*1e3:8.1f}us new {np.median(s['new'])*1e3:8.1f}us "
          f"old/new {np.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})", flush=True)
