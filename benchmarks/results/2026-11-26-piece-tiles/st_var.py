"""Variants of a conversion's loop order, each timed in turn with a copy of the same bytes.
usage: PYTHONPATH=. python benchmarks/results/2026-11-26-piece-tiles/st_var.py ROUNDS CASE KERNEL [--mcpu X]
variants: st_var.json beside this file, per case (reorder lists replacing the first reorder step,
or whole step lists); "_avx2" cases for --mcpu haswell. The model's steps are the working tree's."""
import sys, math, json
from pathlib import Path
import numpy as np
from benchmarks.paired_setup import target_and_args
from workbench.engine.schedules.conversion.steps import conversion_steps
from workbench.bench.conversions import CASES, case_conversions, _compile, _random_args
from workbench.engine.loops.primitives import apply_steps
from workbench.engine.measure.ceilings import stream_copy
from workbench.bench.suite import call_timer
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.base.step import Step
T, args = target_and_args(sys.argv[1:])
ROUNDS, CASE, KERNEL = int(args[0]), args[1], args[2]
VARIANTS = json.loads((Path(__file__).parent / "st_var.json").read_text())[CASE + ("_avx2" if T.get("mcpu") == "haswell" else "")]
case = [c for c in CASES if c.name == CASE][0]
rng = np.random.default_rng(0)
for k, raw, _ in case_conversions(case, T):
    if k != KERNEL: continue
    base = conversion_steps(raw, k, T)
    want = _random_args(raw, rng); _compile(raw, T)(*want)
    timers = {}
    for name, order in [("model", None)] + list(VARIANTS.items()):
        st = list(base)
        if order is not None:
          if isinstance(order, dict):  # a whole step list: [primitive, {args}] pairs
            st = [Step.make(base[0].kind, base[0].target, prim, **{"block": KERNEL, **a}) for prim, a in order["steps"]]
          else:
            i = next(j for j, s in enumerate(st) if s.primitive == "reorder")
            st[i] = Step.make(st[i].kind, st[i].target, "reorder", **{**dict(st[i].args), "loops": order})
        try:
            f = apply_steps(raw, st).mod["main"]
        except Exception as e:
            print(name, "fails:", str(e)[:200]); continue
        fn = _compile(f, T); a = _random_args(f, rng); a[0] = want[0]; fn(*a)
        assert np.array_equal(a[-1].numpy(), want[-1].numpy()), name
        timers[name] = call_timer(lambda fn=fn, a=a: fn(*a))
    nbytes = sum(4 * math.prod(int(n) for n in p.shape) for p in raw.params)
    cp = stream_copy(nbytes // 8 // 16 * 16); cf = _compile(cp, T); ca = _random_args(cp, rng)
    timers["copy"] = call_timer(lambda: cf(*ca))
    s = interleaved_samples(timers, ROUNDS)
    for n in timers:
        if n == "copy": continue
        pct = [100 * c / v for c, v in zip(s["copy"], s[n])]
        print(f"{n:10s} {np.median(s[n]):7.3f} ms  {np.median(pct):4.0f}% of copy ({min(pct):.0f}-{max(pct):.0f})", flush=True)
    print(f"copy       {np.median(s['copy']):7.3f} ms")
