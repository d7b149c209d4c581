"""Paired: the conversion steps before 6577ba1 (old) vs the working tree's (new) on transpose cases, with a copy.
usage: PYTHONPATH=. python benchmarks/results/2026-11-26-transpose-blocks/paired.py ROUNDS [--mcpu X] [case ...]"""
import sys, math, os
import numpy as np
import workbench.engine.schedules.conversion.steps as new
from benchmarks.paired_setup import old_convert, target_and_args
from workbench.bench.conversions import ConversionCase, case_conversions, _compile, _random_args
from workbench.engine.loops.primitives import apply_steps
from workbench.engine.measure.ceilings import stream_copy
from workbench.bench.suite import call_timer
from workbench.engine.base.interleave import interleaved_samples
old = old_convert("6577ba1^")  # the study ran with 6577ba1 not yet committed: HEAD was its parent
T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0]); names = args[1:]  # --bench: the conversions benchmark's cases instead
CASES = [
    ConversionCase("nhwc64_112", (16, 64, 112, 112), 64, 3, 1, 1, "channels_last"),
    ConversionCase("nhwc256_28", (16, 256, 28, 28), 256, 3, 1, 1, "channels_last"),
    ConversionCase("nhwc32_112", (8, 32, 112, 112), 32, 3, 1, 1, "channels_last"),
    ConversionCase("nhwc512_7", (64, 512, 7, 7), 512, 1, 1, 0, "channels_last"),
    ConversionCase("nhwc16_56", (32, 16, 56, 56), 16, 3, 1, 1, "channels_last"),
    ConversionCase("nchw16c", (16, 64, 112, 112), 64, 3, 1, 1, "blocked", {"factor": 16}),
    ConversionCase("nchw8c", (16, 64, 112, 112), 64, 3, 1, 1, "blocked", {"factor": 8}),
    ConversionCase("nhwc_small", (1, 64, 56, 56), 64, 3, 1, 1, "channels_last"),
]
if "--bench" in names:
    from workbench.bench.conversions import CASES
    names = [n for n in names if n != "--bench"]
rng = np.random.default_rng(0)
for case in CASES:
    if names and case.name not in names: continue
    for k, raw, _ in case_conversions(case, T):
        so, sn = old.conversion_steps(raw, k, T), new.conversion_steps(raw, k, T)
        if so == sn:
            print(case.name, k, "same steps"); continue
        want = _random_args(raw, rng); _compile(raw, T)(*want)
        timers = {}
        for name, st in (("old", so), ("new", sn)):
            f = apply_steps(raw, st).mod["main"]
            fn = _compile(f, T); a = _random_args(f, rng); a[0] = want[0]; fn(*a)
            assert np.array_equal(a[-1].numpy(), want[-1].numpy()), (case.name, k, name)
            timers[name] = call_timer(lambda fn=fn, a=a: fn(*a))
        nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
        elems = nbytes // 8 // 16 * 16
        cp = stream_copy(elems); cf = _compile(cp, T); ca = _random_args(cp, rng)
        timers["copy"] = call_timer(lambda: cf(*ca))
        s = interleaved_samples(timers, ROUNDS)
        pct = {n: [100 * c / v for c, v in zip(s["copy"], s[n])] for n in ("old", "new")}
        ratio = [o / n for o, n in zip(s["old"], s["new"])]
        print(f"{case.name:12s} {k:18s} {nbytes/1e6:6.1f}MB old {np.median(s['old']):.3f}ms ({np.median(pct['old']):.0f}%) "
              f"new {np.median(s['new']):.3f}ms ({np.median(pct['new']):.0f}%) new/old speed {min(ratio):.2f}-{max(ratio):.2f}x", flush=True)
