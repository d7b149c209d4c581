"""Which expert kernels of the suite x presets change steps between REV's tiling.py (default
7f0d79d, before the vector-last register tile) and the working tree's; paired timing of those.
usage, from the repository root: PYTHONPATH=. [REV=commit] python benchmarks/results/2026-11-27-vector-last/paired.py ROUNDS [--mcpu X]
(ROUNDS 0: only list the kernels whose steps change)"""
import os
import sys
sys.path.insert(0, "benchmarks")
import numpy as np
from paired_setup import old_module, target_and_args
import workbench.engine.schedules.tiling.steps as new
from workbench.bench.suite import load_suite, workload_graph, call_timer
from workbench.engine.layout.book import LayoutBook
from workbench.engine.measure.ceilings import cache_info
from workbench.bench.conversions import _compile, _random_args
from workbench.engine.schedules.tiling.steps import main_block
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.layout.keys import apply_actions
from workbench.engine.loops.primitives import apply_steps
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import vector_unit, use_all_cores
old = old_module("workbench.engine.schedules.tiling.steps", os.environ.get("REV", "7f0d79d"))
T, args = target_and_args(sys.argv[1:]); ROUNDS = int(args[0])
use_all_cores()
unit, l1 = vector_unit(T), cache_info()[0].get("L1d", 32768)
rng = np.random.default_rng(0)
for w in load_suite("benchmarks/suite.json"):
    g, op = workload_graph(w)
    for preset in ("default", "alt_tiled", "blocked", "channels_last", "nkn"):
        try:
            prog = make_program(g, LayoutBook() if preset == "default" else apply_actions(g, LayoutBook(), preset_actions(g, preset, op)))
        except Exception:
            continue
        for k, f in prog.funcs.items():
            if main_block(f) is None:
                continue
            so, sn = old.tile_steps(f, k, unit, l1), new.tile_steps(f, k, unit, l1)
            if so == sn:
                continue
            if not ROUNDS:
                print("CHANGES", w.name, preset, k, flush=True); continue
            a0 = _random_args(f, rng); _compile(f, T)(*a0); want = a0[-1].numpy()
            timers = {}
            for tag, st in (("old", so), ("new", sn)):
                fn = _compile(apply_steps(f, st).mod["main"], T)
                a = [v for v in _random_args(f, rng)]; a[:-1] = a0[:-1]; fn(*a)
                np.testing.assert_allclose(a[-1].numpy(), want, rtol=1e-4, atol=1e-4)
                timers[tag] = call_timer(lambda fn=fn, a=a: fn(*a))
            s = interleaved_samples(timers, ROUNDS)
            r = [p / q for p, q in zip(s["old"], s["new"])]
            print(f"{w.name:12s} {preset:13s} {k:8s} old {np.median(s['old'])*1e3:8.1f}us new {np.median(s['new'])*1e3:8.1f}us old/new {np.median(r):.2f} ({min(r):.2f}-{max(r):.2f})", flush=True)
