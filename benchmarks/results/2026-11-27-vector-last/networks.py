"""Whether any complex-op kernel of the built-in networks (default layouts) changes its expert steps
between REV (default 7f0d79d) and the working tree, built for this CPU and for AVX2.
usage, from the repository root: PYTHONPATH=. [REV=commit] python benchmarks/results/2026-11-27-vector-last/networks.py"""
import os
import sys
sys.path.insert(0, "benchmarks")
from paired_setup import old_module
import workbench.engine.schedules.tiling.steps as new
from workbench.engine.models import zoo
from workbench.engine.build.program import make_program
from workbench.engine.schedules.tiling.steps import main_block
from workbench.engine.measure.ceilings import cache_info
from workbench.engine.build.targets import vector_unit, DEFAULT_TARGET
old = old_module("workbench.engine.schedules.tiling.steps", os.environ.get("REV", "7f0d79d"))
for mcpu in (None, "haswell"):
    T = dict(DEFAULT_TARGET, **({"mcpu": mcpu} if mcpu else {}))
    unit, l1 = vector_unit(T), cache_info()[0].get("L1d", 32768)
    for name in ("resnet18", "mobilenet_v2", "bert_layer"):
        g = zoo.load(name)
        prog = make_program(g)
        n = ch = 0
        for k, f in prog.funcs.items():
            if main_block(f) is None: continue
            n += 1
            if old.tile_steps(f, k, unit, l1) != new.tile_steps(f, k, unit, l1):
                ch += 1; print("CHANGES", mcpu, name, k)
        print(mcpu, name, n, "kernels", ch, "changed", flush=True)
