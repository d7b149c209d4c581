"""Loops named after the layout dims they run over (``engine.loopdims``), as the Loops page shows them."""

from __future__ import annotations

from workbench.engine.build.lower import stage_layouts
from workbench.engine.session.session import new_session, replay
from workbench.engine.base.step import Step
from workbench.engine.session.kernel_views import nest_view


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


def test_a_tuned_kernels_init_and_update_loops_run_over_the_same_dims():
    """MetaSchedule's conv (its reduction decomposed into conv_init and conv_update): every loop of
    extent > 1 is labelled, spatial ones with the NCHW dims, the reductions by their own names, and
    the init's copy of a loop (``i1_2_init``) with the update's label for it (``i1_2``)."""
    from tests.tuned import tuned_state

    view = nest_view(tuned_state(), "conv")
    update, init = view.dims["conv_update"], view.dims["conv_init"]
    for lp in view.loops["conv_update"]:
        if lp.extent > 1:
            parts = update[lp.name].split(" (")[0].split("·")
            assert parts == [lp.name.split("_")[0]] if lp.reduction else set(parts) <= set("NCHW"), (lp, update)
    same = {name.removesuffix("_init"): label for name, label in init.items()}  # the loops they share keep their names
    assert any(name.endswith("_init") for name in init) and same == {name: update[name] for name in same}
