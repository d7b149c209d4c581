"""Paired: 3342633's alt_tiled preset and expert template (old) vs the working tree's (new) on
the suite's transposed convs x layouts, each kernel checked against the unscheduled one on random
data and timed in turn with the other.
usage: PYTHONPATH=. python benchmarks/results/2026-11-26-tconv-phases/paired.py ROUNDS [--mcpu X]"""
import sys
import numpy as np
import workbench.engine.schedules.tiling.steps as new
import workbench.engine.layout.presets as new_presets
from benchmarks.paired_setup import old_module, target_and_args
from workbench.bench.suite import call_timer, load_suite, workload_graph
from workbench.engine.layout.book import LayoutBook
from workbench.engine.measure.ceilings import cache_info
from workbench.bench.conversions import _compile, _random_args
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.layout.keys import apply_actions
from workbench.engine.loops.primitives import apply_steps
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import use_all_cores, vector_unit
old = old_module("workbench.engine.schedules.tiling.steps", "3342633")
old_presets = old_module("workbench.engine.layout.presets", "3342633")
T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
use_all_cores()
unit, l1 = vector_unit(T), cache_info()[0].get("L1d", 32768)
LAYOUTS = {
    "t2d_dcgan": [("default", {}), ("alt_tiled", dict(tiles=[8, 32], ot=16, it=4)),
                  ("alt_tiled", dict(tiles=[4, 32], ot=16, it=16)), ("alt_tiled", dict(tiles=[8, 32], ot=32, it=4)),
                  ("blocked", {}), ("channels_last", {})],
    "t3d_decoder": [("default", {}), ("alt_tiled", dict(tiles=[2, 32, 32], ot=16, it=16)),
                    ("alt_tiled", dict(tiles=[4, 32, 32], ot=16, it=16)), ("alt_tiled", dict(tiles=[4, 8, 32], ot=16, it=4)),
                    ("blocked", {}), ("channels_last", {})],
}
rng = np.random.default_rng(0)
for w in load_suite("benchmarks/suite.json"):
    if w.name not in LAYOUTS:
        continue
    g, op = workload_graph(w)
    for preset, params in LAYOUTS[w.name]:
        timers = {}
        for tag, presets, tiling in (("old", old_presets, old), ("new", new_presets, new)):
            acts = [] if preset == "default" else presets.preset_actions(g, preset, op, **params)
            func = make_program(g, apply_actions(g, LayoutBook(), acts)).funcs[op]
            fn = _compile(apply_steps(func, tiling.tile_steps(func, op, unit, l1)).mod["main"], T)
            a = _random_args(func, rng)
            _compile(func, T)(*a)
            want = a[-1].numpy().copy()
            fn(*a)
            assert np.allclose(a[-1].numpy(), want, rtol=1e-3, atol=1e-3), (w.name, preset, tag)
            timers[tag] = call_timer(lambda fn=fn, a=a: fn(*a))
        s = interleaved_samples(timers, ROUNDS)
        r = [o / n for o, n in zip(s["old"], s["new"])]
        print(f"{w.name:12s} {preset:13s} {str(params):42s} old {np.median(s['old']):.4f} new {np.median(s['new']):.4f} ms "
              f"old/new {np.median(r):.2f} ({min(r):.2f}-{max(r):.2f})", flush=True)
