"""A first schedule: steps that apply, make a parallel and a vectorized loop, and keep the numerics."""

from __future__ import annotations

import pytest

from tests.engine.loops.kernels import KERNELS, check_numerics
from workbench.engine.loops.apply import apply_steps
from workbench.engine.loops.basic import basic_schedule
from workbench.engine.loops.nest import list_blocks, list_loops


@pytest.mark.parametrize("kname", ["mm", "chain"])
def test_basic_schedule_applies_and_keeps_numerics(kname, rng):
    kernel = KERNELS[kname]
    steps = basic_schedule(kernel.func)
    sch = apply_steps(kernel.func, steps)
    kinds = {lp.kind for b in list_blocks(sch) for lp in list_loops(sch, b)}
    assert {"parallel", "vectorized"} <= kinds
    check_numerics(kernel, sch, rng)
    if kname == "mm":
        assert [s.primitive for s in steps] == ["reorder", "vectorize", "parallel"]
    else:
        assert list_blocks(sch) == ["Y"]  # Z inlined into Y
