"""Paired: the conversion bench's kernels (its analytic schedules, beyond the last-level cache)
built through our TIR pipeline without ``SmallBuffersOnStack`` (before) and with it (now), where
the pass moves a buffer; each pair checked bit-equal and timed in turn with a copy of the same
bytes. usage: PYTHONPATH=. python benchmarks/results/2026-11-27-stack/conversions.py ROUNDS [--mcpu X]"""
import math
import sys

import numpy as np
import tvm

from benchmarks.paired_setup import target_and_args
from workbench.engine import codegen as cg
from workbench.engine.bench import call_timer
from workbench.engine.ceilings import stream_copy
from workbench.engine.convbench import CASES, _compile, _random_args, case_conversions
from workbench.engine.interleave import interleaved_samples
from workbench.engine.targets import target_from, use_all_cores


def _before(**kw):
    default, host, device = tvm.tirx.get_tir_pipeline("s_tir", **kw)
    return tvm.transform.Sequential([default, cg.MergeStridedStores, cg.DenseStridedLoads]), host, device


tvm.tirx.register_tir_pipeline("before", _before)
T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
use_all_cores()
tgt, rng = target_from(T), np.random.default_rng(0)
print("| case | kernel | before % of copy | now % of copy | before/now |\n|---|---|---|---|---|")
for case in CASES:
    for kernel, raw, func in case_conversions(case, T):
        before = tvm.tirx.get_tir_pipeline("before")[0](tvm.tirx.transform.BindTarget(tgt.with_host(tgt))(
            tvm.IRModule({"main": func})))["main"]
        if cg.small_buffers_on_stack(before).same_as(before):
            continue
        a0, timers, outs = _random_args(func, rng), {}, {}
        for pipe in ("before", cg.PIPELINE):
            fn = tvm.compile(tvm.IRModule({"main": func}), target=tgt, tir_pipeline=pipe).jit()["main"]
            a = [tvm.runtime.tensor(v.numpy()) for v in a0]
            fn(*a)
            outs[pipe] = a[-1].numpy()
            timers[pipe] = call_timer(lambda fn=fn, a=a: fn(*a))
        assert np.array_equal(outs["before"], outs[cg.PIPELINE]), (case.name, kernel)
        nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
        cp = stream_copy(nbytes // 8 // 16 * 16)
        cf, cargs = _compile(cp, T), _random_args(cp, rng)
        timers["copy"] = call_timer(lambda: cf(*cargs))
        s = interleaved_samples(timers, ROUNDS)
        pct = {k: [c / t * 100 for c, t in zip(s["copy"], s[k])] for k in ("before", cg.PIPELINE)}
        r = [p / q for p, q in zip(s["before"], s[cg.PIPELINE])]
        print(f"| {case.name} | {kernel} | {np.median(pct['before']):.0f}% | {np.median(pct[cg.PIPELINE]):.0f}% "
              f"| {np.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |", flush=True)
