"""A padded read's borders cut from its interior (``conversion.borders``): the interior copy keeps
no pad condition and the kernel still matches the reference."""

from __future__ import annotations

import pytest

from tests.engine.schedules.conversion.checks import AVX512, ZEN, guarded_stores, scheduled_matches, stem_unfold
from workbench.engine.loops.primitives import apply_steps, list_loops
from workbench.engine.schedules.conversion.steps import conversion_steps


@pytest.mark.slow
@pytest.mark.parametrize("target", [ZEN, AVX512])
def test_a_padded_unfold_copies_its_interior_without_the_pad_condition(target):
    """The stem unfold's reads are guarded by the pad condition, which a 9-lane vector carries
    lane by lane (a branch and a scalar copy each): its W and H tile loops are cut into border
    and interior ranges (``loop_partition``, W first), so that the interior copy has no
    condition left once TVM simplifies it; the borders keep theirs, and the kernel still matches
    the reference. (At batch 16 the batch alone is the parallel loop: a loop fused into it is
    not cut.)"""
    g, book, prog, unfold = stem_unfold(16)
    func = prog.funcs[unfold.name]
    steps = conversion_steps(func, unfold.name, target)
    cuts = [s for s in steps if s.primitive == "loop_partition"]
    w_tiles, h_tiles = (lp.extent for lp in list_loops(func, unfold.name)[2:0:-1])
    assert [(s.get("loop"), sum(s.get("factors"))) for s in cuts] == [("i2", w_tiles), ("i1", h_tiles)]
    assert all(len(s.get("factors")) == 3 and s.get("factors")[1] >= s.get("factors")[0] for s in cuts)
    assert steps[-2:] == cuts
    assert guarded_stores(apply_steps(func, steps)) == 3 * 3 - 1  # the interior copy has none
    assert guarded_stores(apply_steps(func, steps[:-2])) == 1
    scheduled_matches(g, book, target)
