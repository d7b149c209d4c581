"""Paired: the conversion bench's kernels (its analytic schedules, beyond the last-level cache)
built through our TIR pipeline without ``SmallBuffersOnStack`` (before) and with it (now), where
the pass moves a buffer; each pair checked bit-equal and timed in turn with a copy of the same
bytes. usage: PYTHONPATH=. python benchmarks/results/2026-11-27-stack/conversions.py ROUNDS [--mcpu X]"""
import math
import sys

import numpy as np

from benchmarks.paired_setup import stack_moves, stack_timers, target_and_args
from workbench.bench.suite import call_timer
from workbench.engine.measure.ceilings import stream_copy
from workbench.bench.conversions import CASES, _compile, _random_args, case_conversions
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.build.targets import use_all_cores

T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
use_all_cores()
rng = np.random.default_rng(0)
print("| case | kernel | before % of copy | now % of copy | before/now |\n|---|---|---|---|---|")
for case in CASES:
    for kernel, raw, func in case_conversions(case, T):
        if not stack_moves(func, T):
            continue
        timers = stack_timers(func, T, rng)
        nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
        cp = stream_copy(nbytes // 8 // 16 * 16)
        cf, cargs = _compile(cp, T), _random_args(cp, rng)
        timers["copy"] = call_timer(lambda: cf(*cargs))
        s = interleaved_samples(timers, ROUNDS)
        pct = {k: [c / t * 100 for c, t in zip(s["copy"], s[k])] for k in ("before", "now")}
        r = [p / q for p, q in zip(s["before"], s["now"])]
        print(f"| {case.name} | {kernel} | {np.median(pct['before']):.0f}% | {np.median(pct['now']):.0f}% "
              f"| {np.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |", flush=True)
