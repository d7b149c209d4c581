"""The arguments a loop primitive's form starts from: they apply, on a plain kernel and on a
tuned one (a MetaSchedule trace: ``conv_init`` / ``conv_update``), the compute block first; a
split that does not divide its loop says what it wastes."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, strategies as st
from tvm import te

from workbench.engine.base.errors import SessionError
from workbench.engine.loops.args import default_arguments, default_step, form_blocks, split_waste
from workbench.engine.loops.primitives import PRIMITIVES, apply_step, list_blocks, list_loops, loop_step, trace_json
from workbench.engine.session.session import KernelSchedule, loads, dumps, replay
from tests.tuned import TRACE, metaschedule_trace, tuned_state, tuned_step

#: what has no choice that applies on the tuned conv: its reduction is decomposed already, bias is
#: inlined, and relu reads a reduction (it can be neither inlined back nor computed earlier)
NO_CHOICE = {"compute_at", "compute_inline", "reverse_compute_inline", "decompose_reduction"}


@pytest.fixture(scope="module")
def tuned():
    return tuned_state()


def _blocks_and_loops(func) -> dict[str, list]:
    return {b: list_loops(func, b) for b in list_blocks(func)}


def test_a_tuned_kernels_forms_offer_its_compute_block_first(tuned):
    func = tuned.scheduled_func("conv")
    assert list_blocks(func) == ["conv_init", "conv_update", "relu"]  # program order: the init first
    assert form_blocks(_blocks_and_loops(func)) == ["conv_update", "relu", "conv_init"]
    for prim in ("split", "reorder", "unroll", "cache_read", "transform_layout"):
        assert default_arguments(func, prim)["block"] == "conv_update", prim


def test_a_decomposed_reductions_update_block_is_the_default_not_its_init():
    a, b = te.placeholder((64, 64), name="A"), te.placeholder((64, 64), name="B")
    k = te.reduce_axis((0, 64), "k")
    c = te.compute((64, 64), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = apply_step(te.create_prim_func([a, b, c]), loop_step("decompose_reduction", block="C", loop="i"))
    assert list_blocks(sch) == ["C_init", "C_update"]
    assert default_arguments(sch, "split") == {"block": "C_update", "loop": "i"}


@pytest.mark.parametrize("prim", sorted(set(PRIMITIVES) - NO_CHOICE))
def test_each_loop_primitive_applies_to_a_tuned_kernel_from_its_starting_arguments(tuned, prim):
    """What the form starts from names the tuned kernel's blocks and loops, and the session takes
    it: the step goes on top of the tuned trace (not on the unscheduled kernel's conv)."""
    step = default_step(tuned.scheduled_func("conv"), prim, "conv")
    assert step is not None, prim
    new = tuned.push(step)
    assert new.kernel_schedule("conv") == KernelSchedule("loop steps", (step,), trace=json.loads(TRACE.read_text()))
    assert new.scheduled_func("conv").script() == apply_step(tuned.scheduled_func("conv"), step).mod["main"].script()
    again = replay(loads(dumps(new.session)))  # a saved session rebuilds the same kernel
    assert again.scheduled_func("conv").script() == new.scheduled_func("conv").script()


@pytest.mark.parametrize("step", [
    loop_step("compute_at", "conv", block="conv_init", target_block="relu", loop="i0_i1_i2_i3_fused_0"),
    loop_step("compute_inline", "conv", block="conv_init"),
    loop_step("reverse_compute_inline", "conv", block="relu"),
    loop_step("decompose_reduction", "conv", block="conv_update", loop="i3_1"),
], ids=lambda s: s.primitive)
def test_a_primitive_with_no_choice_on_a_tuned_kernel_is_refused_by_tvm_not_by_name(tuned, step):
    assert step.primitive in NO_CHOICE and default_step(tuned.scheduled_func("conv"), step.primitive) is None
    with pytest.raises(SessionError, match="TVM refused") as e:
        tuned.push(step)
    assert "unknown block" not in str(e.value) and "has no loop" not in str(e.value)


def test_hand_steps_on_a_tuned_kernel_keep_its_numerics_and_export_one_trace(tuned):
    split = default_step(tuned.scheduled_func("conv"), "split", "conv")
    edited = tuned.push(split).push(default_step(tuned.push(split).scheduled_func("conv"), "parallel", "conv"))
    assert [s.primitive for s in edited.kernel_schedule("conv").steps] == ["split", "parallel"]
    check = edited.scheduled_program().build(edited.session.target).verify()
    assert check.ok, check
    tuned_kinds = [inst[0] for inst in json.loads(TRACE.read_text())[0]]
    kinds = [inst[0] for inst in trace_json(edited.tvm_schedule("conv"))[0]]  # what an export records
    assert kinds[:len(tuned_kinds)] == tuned_kinds  # the tuned trace, then the hand steps
    assert [k for k in kinds[len(tuned_kinds):] if k not in ("GetSBlock", "GetLoops")] == ["Split", "Parallel"]


def test_a_tuned_result_after_hand_steps_replaces_them(tuned):
    edited = tuned.push(default_step(tuned.scheduled_func("conv"), "unroll", "conv"))
    assert edited.push(tuned_step()).kernel_schedule("conv") == KernelSchedule(
        "tuned", trace=json.loads(TRACE.read_text()))


@pytest.mark.slow
def test_the_stored_trace_is_metaschedules_design_space_after_its_postprocessors(tuned):
    assert metaschedule_trace(replay(tuned.session.undo())) == json.loads(TRACE.read_text())


########## What a split wastes ##########

@pytest.mark.parametrize("factors, extent, want", [
    ([-1, 1000], 3136, "4000 iterations for 3136: 21.6% guarded"),
    ([1000, None], 3136, "4000 iterations for 3136: 21.6% guarded"),  # the inner one inferred: 4
    ([None, 7, 100], 3136, "3500 iterations for 3136: 10.4% guarded"),  # 5 x 700
    ([None, 16], 3136, None),  # divides
    ([196, 16], 3136, None),  # no inferred factor: refused unless it divides
    ([None, 5000], 3136, None),  # more than the loop: refused
    ([None, None], 3136, None),
])
def test_split_waste_names_the_iterations_and_the_guarded_share(factors, extent, want):
    assert split_waste(factors, extent) == want


@given(extent=st.integers(1, 400), inner=st.integers(1, 64))
def test_split_waste_counts_the_iterations_tvm_runs(extent, inner):
    """The loops TVM makes for ``[None, inner]`` run as many iterations as the note says."""
    x = te.placeholder((extent,), name="x")
    y = te.compute((extent,), lambda i: x[i] + 1.0, name="y")
    func = te.create_prim_func([x, y])
    if inner > extent:
        assert split_waste([None, inner], extent) is None
        return
    runs = math.prod(lp.extent for lp in list_loops(
        apply_step(func, loop_step("split", block="y", loop="i", factors=[None, inner])), "y"))
    note = split_waste([None, inner], extent)
    if runs == extent:
        assert note is None
    else:
        assert note == f"{runs} iterations for {extent}: {100 * (runs - extent) / runs:.1f}% guarded"
