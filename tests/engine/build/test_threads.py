"""Tiny kernels run on the calling thread: their parallel loops made serial, the same results."""

from pathlib import Path

import numpy as np
import tvm_ffi

from workbench.engine.build.relaxnet import build_network, network_module
from workbench.engine.build.threads import (SINGLE_THREAD_ATTR, TINY_FLOPS, parallel_loops, single_threaded,
                                            tiny_kernels)
from workbench.engine.session.session import load, replay

ROOT = Path(__file__).resolve().parents[3]


def _bert():
    state = replay(load(ROOT / "sessions" / "bert_tiny_layer.json"))  # GEMMs, reshapes, softmax, LayerNorm
    return state, state.scheduled_program()


def test_tiny_kernels_are_the_small_ones_with_parallel_loops():
    _, prog = _bert()
    tiny = tiny_kernels(prog)
    assert "softmax" in tiny and "ln1" in tiny
    assert not {"q", "ffn1", "ffn2"} & set(tiny)  # the GEMMs stay on the pool
    assert all(prog.flops.get(k, 0) <= TINY_FLOPS and parallel_loops(prog.funcs[k]) for k in tiny)
    assert tiny_kernels(prog, flops=-1) == []


def test_a_single_threaded_kernel_has_no_parallel_loop_and_says_so():
    _, prog = _bert()
    func = prog.funcs["softmax"]
    assert parallel_loops(func) >= 1
    alone = single_threaded(func)
    assert parallel_loops(alone) == 0 and bool(alone.attrs[SINGLE_THREAD_ATTR])
    assert len(alone.script()) > 0.9 * len(func.script())  # the same loops, only their kind changed


def test_the_network_runs_its_tiny_kernels_alone_and_computes_the_same():
    state, prog = _bert()
    values = state.graph.random_inputs(0)
    tiny = set(tiny_kernels(prog))
    mod = network_module(prog, values, tiny)
    for k in prog.plan.kernels:
        if k.name in tiny:
            assert parallel_loops(mod[k.name]) == 0 and SINGLE_THREAD_ATTR in mod[k.name].attrs
        else:
            assert tvm_ffi.structural_equal(mod[k.name], prog.funcs[k.name].with_attr("global_symbol", k.name))
    alone = build_network(prog, values, single_thread=tiny).run(values)
    pooled = build_network(prog, values).run(values)  # by default every kernel on the thread pool
    want = state.graph.reference(values)
    for t in state.graph.outputs:
        np.testing.assert_array_equal(alone[t], pooled[t])
        np.testing.assert_allclose(alone[t], want[t], rtol=1e-4, atol=1e-4 * float(np.abs(want[t]).max()))
