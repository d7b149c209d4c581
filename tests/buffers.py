"""Shared check: run a program kernel by kernel and compare every buffer a kernel writes with
the reference in that buffer's stored layout (padding must be zero, overlaps duplicated)."""

from __future__ import annotations

import numpy as np

from workbench.engine.build.program import Program, make_program
from workbench.engine.build.targets import DEFAULT_TARGET

TARGET = DEFAULT_TARGET


def check_stored_buffers(graph, book, seed: int = 0) -> Program:
    """Build ``graph`` under ``book``, run it kernel by kernel on random inputs and assert that
    every kernel-written buffer matches the reference; returns the program."""
    prog = make_program(graph, book)
    built = prog.build(TARGET)
    values = graph.random_inputs(seed)
    ref = graph.reference(values)
    bufs = built.run_buffers(values)
    written = {b for k in prog.plan.kernels for b in k.outputs}  # fused intermediates stay inside a kernel
    assert written >= set(prog.plan.outputs.values())
    for name in written:
        buf = prog.plan.buffers[name]
        want = buf.layout.to_stored(ref[buf.tensor])
        got = bufs[name]
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())),
                                   err_msg=name)
    assert built.verify(values).ok
    return prog
