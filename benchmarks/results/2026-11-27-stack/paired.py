"""Paired: every expert and conversion kernel of the suite x 5 layout presets built through our
TIR pipeline without ``SmallBuffersOnStack`` (before) and with it (now), only where the pass
changes an allocation; each pair checked equal on random data and timed in turn.
usage: PYTHONPATH=. python benchmarks/results/2026-11-27-stack/paired.py ROUNDS [--mcpu X]"""
import sys

import numpy as np
import tvm

from benchmarks.paired_setup import target_and_args
from workbench.engine import codegen as cg
from workbench.engine.bench import call_timer, load_suite, workload_graph
from workbench.engine.book import LayoutBook
from workbench.engine.convbench import _random_args
from workbench.engine.expert import expert_steps
from workbench.engine.interleave import interleaved_samples
from workbench.engine.keys import apply_actions
from workbench.engine.loops import apply_steps
from workbench.engine.presets import preset_actions
from workbench.engine.program import make_program
from workbench.engine.targets import target_from, use_all_cores


def _before(**kw):
    default, host, device = tvm.tirx.get_tir_pipeline("s_tir", **kw)
    return tvm.transform.Sequential([default, cg.MergeStridedStores, cg.DenseStridedLoads]), host, device


tvm.tirx.register_tir_pipeline("before", _before)
T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
use_all_cores()
rng, ratios = np.random.default_rng(0), []
for w in load_suite("benchmarks/suite.json"):
    g, op = workload_graph(w)
    for preset in ("default", "alt_tiled", "blocked", "channels_last", "nkn"):
        try:
            book = LayoutBook() if preset == "default" else apply_actions(g, LayoutBook(), preset_actions(g, preset, op))
            prog = make_program(g, book)
        except Exception:  # noqa: BLE001 - a preset that does not apply to this op
            continue
        for k, f in prog.funcs.items():
            func = apply_steps(f, expert_steps(f, k, T)).mod["main"]
            tgt = target_from(T)
            before = tvm.tirx.get_tir_pipeline("before")[0](
                tvm.tirx.transform.BindTarget(tgt.with_host(tgt))(tvm.IRModule({"main": func})))["main"]
            if cg.small_buffers_on_stack(before).same_as(before):
                continue  # no buffer the pass moves
            a0, timers, outs = _random_args(func, rng), {}, {}
            for pipe in ("before", cg.PIPELINE):
                fn = tvm.compile(tvm.IRModule({"main": func}), target=target_from(T), tir_pipeline=pipe).jit()["main"]
                a = [tvm.runtime.tensor(v.numpy()) for v in a0]
                fn(*a)
                outs[pipe] = a[-1].numpy()
                timers[pipe] = call_timer(lambda fn=fn, a=a: fn(*a))
            assert np.array_equal(outs["before"], outs[cg.PIPELINE]), (w.name, preset, k)
            s = interleaved_samples(timers, ROUNDS)
            r = [p / q for p, q in zip(s["before"], s[cg.PIPELINE])]
            ratios.append(float(np.median(r)))
            print(f"| {w.name} | {preset} | {k} | {np.median(s['before']) * 1e3:.1f} | {np.median(s[cg.PIPELINE]) * 1e3:.1f} "
                  f"| {np.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |", flush=True)
print("geomean before/now", round(float(np.exp(np.mean(np.log(ratios)))), 3), "over", len(ratios), "kernels")
