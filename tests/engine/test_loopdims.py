"""Loops named after the layout dims they run over (``engine.loopdims``), as the Loops page shows them."""

from __future__ import annotations

from workbench.engine.lower import stage_layouts
from workbench.engine.session import new_session, replay
from workbench.engine.step import Step
from workbench.engine.views import nest_view


def _tiled_stem():
    # 32 output channels per tile: more than one vector on AVX2 and on AVX-512, so the expert splits them
    state = replay(new_session("r18_stem")).push(Step.make("preset", "conv", "alt_tiled", tiles=[4, 16], ot=32, it=1))
    return state, state.home_kernel("conv")


def test_each_spatial_loop_of_a_stage_is_the_dim_of_the_layout_it_writes():
    state, kernel = _tiled_stem()
    view = nest_view(state, kernel)
    plan = state.program.plan
    stages = stage_layouts(plan, next(k for k in plan.kernels if k.name == kernel))
    assert set(view.blocks) == set(stages)  # unscheduled: one block per stage
    for block in view.blocks:
        dims = [d.name for d in stages[block].dims]
        spatial = [lp.name for lp in view.loops[block] if not lp.reduction]
        assert [view.dims[block][name] for name in spatial] == dims  # i0 -> N, i1 -> H.o, ...
    conv = {lp.name: view.dims["conv"][lp.name] for lp in view.loops["conv"] if lp.reduction}
    assert conv and all(label == name for name, label in conv.items())  # rc, ry, rx keep their names
    assert "C.i" in stages["conv"].label.split()  # the layout is the tiled one, not NCHW


def test_split_and_fused_loops_name_their_parts_after_the_expert_schedule():
    state, kernel = _tiled_stem()
    done = state.with_expert_schedule(kernel)
    view = nest_view(done, kernel)
    labels = [label for block in view.blocks for label in view.dims.get(block, {}).values()]
    assert any("·" in label for label in labels)  # a fused loop runs over several dims
    parts = [label for label in labels if label.endswith(")")]
    assert parts and all(label.rsplit(" (", 1)[1].split("/")[0].isdigit() for label in parts)  # "C.i (1/3)"
    # every labelled loop exists in its block
    for block, names in view.dims.items():
        assert set(names) <= {lp.name for lp in view.loops[block]}
