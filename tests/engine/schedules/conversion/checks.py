"""Helpers of the conversion schedules' tests: the targets they schedule for, a scheduled
conversion checked against the reference, and the loops a scheduled kernel ends with."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import tvm
from tvm import s_tir, tirx

from tests.engine.schedules.graphs import alt_graph, conversion_kernels
from workbench.engine.build.program import make_program
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.loops.primitives import LoopInfo, apply_steps, list_loops, walk_nest
from workbench.engine.schedules.conversion.steps import conversion_steps

TARGET = {"kind": "llvm", "num-cores": 2}
AVX2 = {"kind": "llvm", "mcpu": "haswell", "num-cores": 4}
AVX512 = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}
ZEN = {"kind": "llvm", "mcpu": "znver3", "num-cores": 2}
#: 8 lanes and the order model's gathered rows (an AMD CPU: no register tiles for them; its
#: ``_SCATTER_AVERSE`` rule applies too)
GATHER = dict(ZEN, **{"num-cores": 4})


def scheduled_matches(graph, book, target=TARGET, seed=0):
    """Schedule every conversion kernel with ``conversion_steps``; every buffer any kernel writes
    matches the reference in its stored layout (padding zero, halos duplicated)."""
    prog = make_program(graph, book)
    convs = conversion_kernels(prog)
    assert convs, "the case makes no conversion kernel"
    funcs = {}
    for k in convs:
        steps = conversion_steps(prog.funcs[k.name], k.name, target)
        prims = [s.primitive for s in steps]
        last = len(prims) - 1 - prims[::-1].index("vectorize")  # then only the borders cut off
        assert set(prims[last + 1:]) <= {"loop_partition"} and all(s.kind == "loop" for s in steps)
        funcs[k.name] = apply_steps(prog.funcs[k.name], steps).mod["main"]
    built = prog.with_funcs(funcs).build(TARGET)
    values = graph.random_inputs(seed)
    ref = graph.reference(values)
    bufs = built.run_buffers(values)
    for k in prog.plan.kernels:
        for name in k.outputs:
            buf = prog.plan.buffers[name]
            np.testing.assert_allclose(bufs[name], buf.layout.to_stored(ref[buf.tensor]), rtol=1e-4, atol=1e-4,
                                       err_msg=name)
    assert built.verify(values).ok
    return convs


def alt_kernels(shape, tiles):
    g = alt_graph(shape, 16)
    prog = make_program(g, apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=tiles)))
    unfold, back = conversion_kernels(prog)
    return prog, unfold.name, back.name


def kernel_loops(sch, kernel):
    """The loops around the kernel's block, from the root; where ``borders`` cut the block into
    copies, around its largest copy (the interior), the loops of the blocks above it first."""
    nests = []
    walk_nest(sch.mod["main"], lambda r, ctx: nests.append((r.block.name_hint, ctx)) or ctx,
              lambda loop, ctx: ctx + [loop], [])
    leaves = [(name, loops) for name, loops in nests
              if name.startswith(kernel) and not name.endswith(("_common", "_partition"))]
    name, loops = max(leaves, key=lambda nl: math.prod(int(f.extent) for f in nl[1]))
    own = list_loops(sch, name)
    outer = loops[:len(loops) - len(own)]
    return [LoopInfo(name, str(f.loop_var.name), int(f.extent), tirx.ForKind(int(f.kind)).name.lower(), d)
            for d, f in enumerate(outer)] + [replace(lp, depth=len(outer) + lp.depth) for lp in own]


def scheduled_loops(prog, kernel, target=AVX2):
    steps = conversion_steps(prog.funcs[kernel], kernel, target)
    return steps, kernel_loops(apply_steps(prog.funcs[kernel], steps), kernel)


def stem_unfold(batch=1):
    """The stem's input unfold (tiles [14, 2], it = 1): 9-float tile rows."""
    g = alt_graph((batch, 3, 128, 128), 16, 7, 2, 3)
    book = apply_actions(g, LayoutBook(), preset_actions(g, "alt_tiled", "conv", tiles=[14, 2], ot=16, it=1))
    prog = make_program(g, book)
    return g, book, prog, next(k for k in conversion_kernels(prog) if k.name == "convert_data_conv")


def guarded_stores(sch):
    """How many stores keep a pad condition once the blocks are lowered and TVM simplified them."""
    lower = tvm.transform.Sequential([s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.LowerOpaqueBlock(),
                                      s_tir.transform.StmtSimplify()])
    return lower(sch.mod)["main"].script().count("if_then_else")
