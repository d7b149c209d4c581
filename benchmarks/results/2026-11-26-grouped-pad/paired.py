"""Paired: 3342633's expert template (old: every padding stage a parallel pass of its own) vs the
working tree's (new: under the tile's parallel loop where each iteration reads a slice of its
own), on grouped, depthwise and plain convs (NCHW unless named), only where the steps differ;
each kernel checked against the unscheduled one and timed in turn with the other.
usage: PYTHONPATH=. python benchmarks/results/2026-11-26-grouped-pad/paired.py ROUNDS [--mcpu X] [--rev R]
(``--rev``: the older template's commit, 3342633 unless given; d1f05fb for the depthwise planes
of ``2026-11-27-stack``)"""
import sys
import numpy as np
import workbench.engine.schedules.tiling.steps as new
from benchmarks.paired_setup import old_module, target_and_args
from workbench.bench.suite import call_timer
from workbench.engine.layout.book import LayoutBook
from workbench.engine.measure.ceilings import cache_info
from workbench.bench.conversions import _compile, _random_args
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.layout.keys import apply_actions
from workbench.engine.loops.primitives import apply_steps
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import use_all_cores, vector_unit
T, args = target_and_args(sys.argv[1:])
REV = args.pop(args.index("--rev") + 1) if "--rev" in args else "3342633"
args = [a for a in args if a != "--rev"]
old = old_module("workbench.engine.schedules.tiling.steps", REV)
ROUNDS = int(args[0])
use_all_cores()
unit, l1 = vector_unit(T), cache_info()[0].get("L1d", 32768)


def conv(c, size, stride=1, groups=1, cout=None, k=3):
    b = GraphBuilder("g")
    x = b.input("data", (1, c, size, size), "NCHW")
    b.op("conv", "conv2d", x, b.const("conv.weight", (cout or c, c // groups, k, k), "OIHW"), padding=k // 2,
         stride=stride, groups=groups, depthwise=groups == c and (cout or c) == c)
    return b.build()


channels_last = lambda g: preset_actions(g, "channels_last", "conv") + preset_actions(g, "channels_last", "data@conv")  # noqa: E731
CASES = {  # name: (graph, layout steps)
    "grp_resnext 128ch 28x28 g32": (conv(128, 28, groups=32), None),
    "grp 128ch 28x28 g32 NHWC": (conv(128, 28, groups=32), channels_last),
    "grp 256ch 56x56 g32": (conv(256, 56, groups=32), None),
    "grp 512ch 14x14 g32": (conv(512, 14, groups=32), None),
    "dw 144ch 28x28 (dep_mv2)": (conv(144, 28, groups=144), None),
    "dw 96ch 56x56": (conv(96, 56, groups=96), None),
    "dw 384ch 14x14": (conv(384, 14, groups=384), None),
    "dw 960ch 7x7": (conv(960, 7, groups=960), None),
    "dw 144ch 56x56 s2": (conv(144, 56, 2, groups=144), None),
    "conv 64->128 56x56 s2": (conv(64, 56, 2, cout=128), None),
    "stem 3->64 224x224 7x7 s2": (conv(3, 224, 2, cout=64, k=7), None),
}
rng = np.random.default_rng(0)
for name, (g, layout) in CASES.items():
    func = make_program(g, apply_actions(g, LayoutBook(), layout(g)) if layout else LayoutBook()).funcs["conv"]
    so, sn = old.tile_steps(func, "conv", unit, l1), new.tile_steps(func, "conv", unit, l1)
    if so == sn:
        print(f"{name:28s} same steps", flush=True)
        continue
    timers = {}
    a0 = _random_args(func, rng)
    _compile(func, T)(*a0)
    for tag, steps in (("old", so), ("new", sn)):
        fn, a = _compile(apply_steps(func, steps).mod["main"], T), _random_args(func, rng)
        a[:-1] = a0[:-1]
        fn(*a)
        assert np.allclose(a[-1].numpy(), a0[-1].numpy(), rtol=1e-3, atol=1e-3), (name, tag)
        timers[tag] = call_timer(lambda fn=fn, a=a: fn(*a))
    s = interleaved_samples(timers, ROUNDS)
    r = [o / n for o, n in zip(s["old"], s["new"])]
    print(f"{name:28s} old {np.median(s['old']) * 1e3:7.1f} us new {np.median(s['new']) * 1e3:7.1f} us "
          f"old/new {np.median(r):.2f} ({min(r):.2f}-{max(r):.2f})", flush=True)
