"""Stem/other conv on ALT's tiled layout with and without the output's layout steps.
usage: PYTHONPATH=. python benchmarks/results/2026-11-27-vector-last/tile_out.py WORKLOAD 'tiles' ot it [rounds]"""
import sys, json
import numpy as np
from workbench.bench.suite import load_suite, workload_graph
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.program import make_program
from workbench.engine.schedules.expert import expert_steps
from workbench.engine.schedules.policy import scheduled_funcs
from workbench.engine.loops.primitives import apply_steps
from workbench.engine.build.targets import DEFAULT_TARGET
T = dict(DEFAULT_TARGET)
w = next(w for w in load_suite("benchmarks/suite.json") if w.name == sys.argv[1])
g, op = workload_graph(w)
params = dict(tiles=json.loads(sys.argv[2]), ot=int(sys.argv[3]), it=int(sys.argv[4]))
acts = preset_actions(g, "alt_tiled", op, **params)
nd = len(g.tensors[op].shape) - 2
variants = {"tiled_out": acts, "nchw_out": preset_actions(g, "alt_tiled", op, **params, tile_out=False)}
assert all(a.target != op for a in variants["nchw_out"]), variants["nchw_out"]
vals = g.random_inputs()
for name, a in variants.items():
    prog = make_program(g, apply_actions(g, LayoutBook(), a))
    st = expert_steps(prog.funcs[op], op, T)
    sch = apply_steps(prog.funcs[op], st)
    prog = prog.with_funcs({**scheduled_funcs(prog, T), op: sch.mod["main"]})
    b = prog.build(T)
    v = b.verify(vals); print(name, "verified", v.ok, [k.name for k in prog.plan.kernels]); [print("  ", s) for s in st] if "steps" in sys.argv else None
    for r in range(int(sys.argv[5]) if len(sys.argv) > 5 else 2):
        ts = b.time(vals, repeat=5, min_ms=20)
        print(name, v.ok, " ".join(f"{t.name}={t.latency_ms:.4f}" for t in ts), f"total={sum(t.latency_ms for t in ts):.4f}")
