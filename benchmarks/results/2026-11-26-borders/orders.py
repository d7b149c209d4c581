"""Loop orders of the stem unfold (tiles [14, 2], it = 1) with its borders cut, each timed in turn
with a copy of the same bytes: "new" is the working tree's schedule; c_h_w, c_w_h, w_c_h the
loops outside the 9-float row (C = channel, h = row in the tile, w = W tile; the batch and H tile
outside), each with the W and H tile loops cut into border and interior (w_c_h is the
destination's order); dest, dest_w: the destination's order uncut, and with the W tiles cut.
usage: PYTHONPATH=. python benchmarks/results/2026-11-26-borders/orders.py ROUNDS [--mcpu X]"""
import sys
import numpy as np
from benchmarks.paired_setup import target_and_args, timed_in_turn
from workbench.bench.conversions import CASES, case_conversions
from workbench.engine.schedules.conversion.steps import conversion_steps
from workbench.engine.loops.primitives import loop_step
T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0]); CASE = args[1] if len(args) > 1 else "alt_stem_14x2_it1"
case = [c for c in CASES if c.name == CASE][0]
K = "convert_data_conv"
def S(p, **a): return loop_step(p, K, **a)
for k, raw, _ in case_conversions(case, T):
    if k != K: continue
    dest = [S("fuse", block=K, loops=["i5", "i6"]), S("parallel", block=K, loop="i0"),
            S("vectorize", block=K, loop="i5_i6_fused")]
    cut_w = [S("loop_partition", block=K, loop="i2", factors=[1, 54, 2])]
    cut_h = [S("loop_partition", block=K + "_i2_common", loop="i1", factors=[1, 6, 2])]

    def order(loops):
        return dest[:1] + [S("reorder", block=K, loops=loops + ["i5_i6_fused"])] + dest[1:] + cut_w + cut_h
    V = {"new": conversion_steps(raw, k, T), "dest": dest, "dest_w": dest + cut_w,
         "c_h_w": order(["i0", "i1", "i3", "i4", "i2"]), "c_w_h": order(["i0", "i1", "i3", "i2", "i4"]),
         "w_c_h": order(["i0", "i1", "i2", "i3", "i4"])}
    s = timed_in_turn(raw, V, T, ROUNDS, copy=True)
    for n in s:
        if n == "copy": continue
        pct = [100 * c / v for c, v in zip(s["copy"], s[n])]
        print(f"{n:10s} {np.median(s[n]):7.3f} ms  {np.median(pct):4.0f}% of copy ({min(pct):.0f}-{max(pct):.0f})", flush=True)
    print(f"copy       {np.median(s['copy']):7.3f} ms")
