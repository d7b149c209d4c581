"""Paired: every kernel of the suite x presets (expert schedules, conversions on their analytic schedules)
built with the workbench's pipeline without ``MaskedLoads`` (old) and with it (new), on the host CPU; the kernels
whose code differs are checked against each other on random data and timed in turn.
usage: PYTHONPATH=. python benchmarks/results/2026-11-27-masked-loads/paired.py ROUNDS [--mcpu X] [--networks]"""
import sys
import numpy as np
import tvm
from benchmarks.paired_setup import target_and_args
from workbench.engine.build import codegen
from workbench.bench.suite import call_timer, load_suite, workload_graph
from workbench.engine.layout.book import LayoutBook
from workbench.bench.conversions import _random_args
from workbench.engine.schedules.expert import expert_steps
from workbench.engine.schedules.conversion.steps import conversion_steps
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.layout.keys import apply_actions
from workbench.engine.loops.primitives import apply_steps
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import target_from, use_all_cores

T, args = target_and_args(sys.argv[1:])
ROUNDS = int(args[0])
use_all_cores()
tvm.tirx.register_tir_pipeline("wb_nomask", codegen.pipeline_of(tuple(p for p in codegen.PASSES
                                                                   if p is not codegen.MaskedLoads)))
tgt = target_from(T)


def build(func, pipeline):
    return tvm.compile(tvm.IRModule({"main": func}), target=tgt, tir_pipeline=pipeline)


def kernels():
    if "--networks" in args:  # the built-in networks on their default layouts, each kernel once
        from workbench.engine.models import zoo
        for net in ("resnet18", "mobilenet_v2", "bert_layer"):
            prog = make_program(zoo.load(net))
            for k, f in prog.funcs.items():
                try:
                    yield net, k, apply_steps(f, expert_steps(f, k, T)).mod["main"]
                except Exception as e:  # an element-wise kernel or one with no expert schedule: unscheduled
                    yield net, k, f
        return
    for w in load_suite("benchmarks/suite.json"):
        g, op = workload_graph(w)
        for preset in ("default", "alt_tiled", "blocked", "channels_last", "nkn"):
            try:
                prog = make_program(g, LayoutBook() if preset == "default" else
                                    apply_actions(g, LayoutBook(), preset_actions(g, preset, op)))
            except Exception:
                continue
            for k, f in prog.funcs.items():
                try:
                    st = conversion_steps(f, k, T) if k.startswith("convert") else expert_steps(f, k, T)
                    yield f"{w.name}/{preset}", k, apply_steps(f, st).mod["main"]
                except Exception as e:  # a kernel with no expert schedule keeps none
                    print("skip", w.name, preset, k, type(e).__name__, flush=True)


rng = np.random.default_rng(0)
same = total = 0
for name, k, f in kernels():
    total += 1
    old, new = build(f, "wb_nomask"), build(f, codegen.PIPELINE)
    if old.mod.inspect_source("asm") == new.mod.inspect_source("asm"):
        same += 1
        continue
    fo, fn = old.jit()["main"] if hasattr(old, "jit") else old["main"], new.jit()["main"] if hasattr(new, "jit") else new["main"]
    a = _random_args(f, rng); b = [tvm.runtime.tensor(x.numpy()) for x in a]
    fo(*a); fn(*b)
    np.testing.assert_allclose(b[-1].numpy(), a[-1].numpy(), rtol=1e-5, atol=1e-5)
    s = interleaved_samples({"old": call_timer(lambda: fo(*a)), "new": call_timer(lambda: fn(*b))}, ROUNDS)
    r = [p / q for p, q in zip(s["old"], s["new"])]
    print(f"{name:28s} {k:18s} old {np.median(s['old'])*1e3:9.1f}us new {np.median(s['new'])*1e3:9.1f}us "
          f"old/new {np.median(r):.2f} ({min(r):.2f}-{max(r):.2f})", flush=True)
print(total, "kernels,", same, "with the same code")
