"""The schedule policy: one order (own, pin, expert, conversion, default), pins that hold only
for the kernel they were made for, fallbacks in the same order."""

import pytest

from workbench.engine.schedules import policy as P
from workbench.engine.base.errors import LoopError
from workbench.engine.session.session import new_session, replay
from workbench.engine.base.step import Step

TARGET = {"kind": "llvm", "num-cores": 2}


@pytest.fixture(scope="module")
def prog():
    """The ResNet-18 stem on ALT's tiled layout: pad, conv (+ bias, relu), one conversion."""
    return replay(new_session("r18_stem")).push(Step.make("preset", "conv", "alt_tiled")).program


def test_the_policy_order(prog):
    conversion = P.choose(prog, "convert_relu_out", TARGET)
    assert conversion.kind == "conversion" and conversion.steps
    assert P.choose(prog, "conv", TARGET).kind == "default" and P.choose(prog, "pad", TARGET) == P.DEFAULT
    expert = P.choose(prog, "conv", TARGET, expert=True)
    assert expert.kind == "expert" and expert.steps == tuple(P.analytic_steps(prog.funcs["conv"], "conv", TARGET))
    # a kernel without a complex op takes schedules.simple's analytic schedule; a conversion asked for
    # an expert schedule gets the same steps as its conversion schedule
    assert P.choose(prog, "pad", TARGET, expert=True).kind == "expert"
    assert P.choose(prog, "convert_relu_out", TARGET, expert=True).steps == conversion.steps
    own = P.KernelSchedule("loop steps", (Step.make("loop", "conv", "parallel", block="conv", loop="i1"),))
    pin = P.Pin("conv", P.fingerprint(prog.funcs["conv"], TARGET), P.DEFAULT)
    assert P.choose(prog, "conv", TARGET, own=own, pinned=pin, expert=True) is own
    assert P.choose(prog, "conv", TARGET, pinned=pin, expert=True) is P.DEFAULT  # the pin before the expert


def test_a_pin_holds_only_for_the_kernel_and_target_it_was_made_for(prog):
    pinned = P.KernelSchedule("conversion", ())
    pin = P.Pin("convert_relu_out", P.fingerprint(prog.funcs["convert_relu_out"], TARGET), pinned)
    assert P.choose(prog, "convert_relu_out", TARGET, pinned=pin) is pinned
    other = P.choose(prog, "convert_relu_out", TARGET, pinned=P.Pin("convert_relu_out", "0" * 16, pinned))
    assert other is not pinned and other.steps  # another kernel's pin: the policy's present choice
    assert P.choose(prog, "pad", TARGET, pinned=pin) == P.DEFAULT
    elsewhere = {**TARGET, "num-cores": 4}  # e.g. ``replay --target``: the policy chooses for that target
    assert P.choose(prog, "convert_relu_out", elsewhere, pinned=pin).steps


def test_fingerprints_tell_kernels_apart(prog):
    prints = {k: P.fingerprint(f, TARGET) for k, f in prog.funcs.items()}
    assert len(set(prints.values())) == len(prints) and all(len(p) == 16 for p in prints.values())
    assert P.fingerprint(prog.funcs["conv"], dict(reversed(TARGET.items()))) == prints["conv"]
    assert P.fingerprint(prog.funcs["conv"], {**TARGET, "mcpu": "znver4"}) != prints["conv"]


def test_scheduled_funcs_schedule_what_the_policy_gives(prog):
    funcs = P.scheduled_funcs(prog, TARGET, expert={"conv"})
    assert sorted(funcs) == ["conv", "convert_relu_out"]  # pad stays on TVM's default
    want = P.choose(prog, "conv", TARGET, expert=True).apply(prog.funcs["conv"]).mod["main"].script()
    assert funcs["conv"].script() == want != prog.funcs["conv"].script()
    assert prog.with_funcs(funcs).build(TARGET).verify().ok


def test_analytic_steps_refuse_what_no_template_fits():
    from tvm import te

    x = te.placeholder((4, 8), name="x")
    two = te.create_prim_func([x, te.compute((4, 8), lambda i, j: x[i, j] * 2.0, name="a"),
                               te.compute((8,), lambda j: x[0, j], name="b")])
    with pytest.raises(LoopError):
        P.analytic_steps(two, "k", TARGET, complex_op=True)


def test_fallbacks_are_tried_in_the_policy_order():
    assert [k for k, _ in P.in_order({"default": 1, "expert": 2, "tuned": 3})] == ["tuned", "expert", "default"]
    with pytest.raises(ValueError, match="unknown schedule kind 'settled'"):
        list(P.in_order({"settled": 1}))
