"""Paired: the conversion steps of aa833da (old) vs the working tree's (new, _whole_rows), on the conversions
benchmark's cases and the suite's workloads x presets (batch 1), each timed in turn with a copy.
usage: PYTHONPATH=. python benchmarks/results/2026-11-27-whole-rows/paired.py ROUNDS [--mcpu X] [--suite-only|--cases-only]"""
import sys, math
import numpy as np
import workbench.engine.expert.convert as new
from benchmarks.paired_setup import old_convert, target_and_args
from workbench.engine.convbench import CASES, case_conversions, _compile, _random_args
from workbench.engine.loops import apply_steps
from workbench.engine.ceilings import stream_copy
from workbench.engine.bench import call_timer, load_suite, workload_graph
from workbench.engine.interleave import interleaved_samples
from workbench.engine.book import LayoutBook
from workbench.engine.keys import apply_actions
from workbench.engine.presets import preset_actions
from workbench.engine.program import make_program
old = old_convert("aa833da")  # the order model before _whole_rows
T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
funcs = []
if "--suite-only" not in args:
    for case in CASES:
        funcs += [(case.name, k, raw) for k, raw, _ in case_conversions(case, T)]
if "--cases-only" not in args:
    for w in load_suite("benchmarks/suite.json"):
        g, op = workload_graph(w)
        for preset in ("alt_tiled", "blocked", "channels_last", "nkn"):
            try:
                prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, preset, op)))
            except Exception:
                continue
            funcs += [(f"{w.name}/{preset}", k, f) for k, f in prog.funcs.items() if k.startswith("convert")]
rng = np.random.default_rng(0)
same = 0
for name, k, raw in funcs:
    so, sn = old.conversion_steps(raw, k, T), new.conversion_steps(raw, k, T)
    if so == sn:
        same += 1
        continue
    want = _random_args(raw, rng); _compile(raw, T)(*want)
    timers = {}
    for label, st in (("old", so), ("new", sn)):
        f = apply_steps(raw, st).mod["main"]
        fn = _compile(f, T); a = _random_args(f, rng); a[0] = want[0]; fn(*a)
        assert np.array_equal(a[-1].numpy(), want[-1].numpy()), (name, k, label)
        timers[label] = call_timer(lambda fn=fn, a=a: fn(*a))
    nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
    elems = nbytes // 8 // 16 * 16
    cp = stream_copy(elems); cf = _compile(cp, T); ca = _random_args(cp, rng)
    timers["copy"] = call_timer(lambda: cf(*ca))
    s = interleaved_samples(timers, ROUNDS)
    pct = {n: [100 * c / v for c, v in zip(s["copy"], s[n])] for n in ("old", "new")}
    ratio = [o / n for o, n in zip(s["old"], s["new"])]
    print(f"{name:26s} {k:18s} {nbytes/1e6:7.2f}MB old {np.median(s['old'])*1e3:9.1f}us ({np.median(pct['old']):3.0f}%) "
          f"new {np.median(s['new'])*1e3:9.1f}us ({np.median(pct['new']):3.0f}%) old/new {np.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})", flush=True)
print(len(funcs), "conversions,", same, "with the same steps")
