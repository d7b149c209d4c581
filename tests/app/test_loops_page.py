"""AppTest tests of the Loops page: on a tuned kernel (a MetaSchedule trace applied, as the Tuning
page's Apply does) every primitive's form starts from the tuned kernel's blocks and loops, the
compute block first, and an applied primitive edits the tuned kernel; a split that does not
divide its loop says what it wastes and still applies."""

from __future__ import annotations

import math

from streamlit.testing.v1 import AppTest

from tests.app.apptest import click_reuses_the_preview, record_pushes, session
from tests.engine.loops.test_args import NO_CHOICE
from tests.tuned import tuned_step


def _loops_page(at: AppTest, tuned: bool) -> AppTest:
    if tuned:  # the state a tuning result's Apply leaves
        at.session_state["state"] = at.session_state["state"].push(tuned_step())
    at.switch_page("../pages/loops.py").run()
    at.selectbox(key="loop_kernel").set_value("conv").run()
    assert not at.exception, at.exception
    return at


def _refusals(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "would be refused" in w.value]


def test_every_primitive_on_a_tuned_kernel_starts_from_its_blocks_compute_block_first(at):
    _loops_page(at, tuned=True)
    table = next(d.value for d in at.dataframe if "layout dim" in d.value.columns)
    assert list(dict.fromkeys(table.block)) == ["conv_init", "conv_update", "relu"]  # the nest, in program order
    assert not _refusals(at) and not at.error, (_refusals(at), [e.value for e in at.error])
    for option in at.selectbox(key="loop_prim").options:
        prim = option.split(":", 1)[0]
        at.selectbox(key="loop_prim").set_value(prim).run()
        block = at.selectbox(key=f"la_{prim}_block")
        assert block.options[0] == "conv_update" and block.value in ("conv_update", "relu"), (prim, block.value)
        if prim in NO_CHOICE:  # nothing applies: the check says why, about the tuned kernel's blocks and loops
            (refusal,) = _refusals(at)
            assert "unknown block" not in refusal and "has no loop" not in refusal, (prim, refusal)
        else:
            assert not _refusals(at) and not at.button(key="apply_loop").disabled, (prim, _refusals(at))
    assert session(at).steps[-1].kind == "tuned"


def test_a_primitive_applied_to_a_tuned_kernel_edits_the_tuned_kernel(at):
    _loops_page(at, tuned=True)
    assert any(c.value.startswith("This kernel runs a tuning result (MetaSchedule's trace);") for c in at.caption)
    at.selectbox(key="loop_prim").set_value("reorder").run()
    loops = at.multiselect(key="la_reorder_loops").value
    at.button(key="apply_loop").click().run()
    assert not at.error and not at.exception, [e.value for e in at.error]
    state = at.session_state["state"]
    assert [s.primitive for s in session(at).steps] == ["tuned", "reorder"]
    assert state.kernel_schedule("conv").trace == tuned_step().get("trace")  # on top of the tuned trace
    assert any("trace, then 1 loop step of yours)" in c.value for c in at.caption), [c.value for c in at.caption]
    assert "conv_init" in state.scheduled_func("conv").script()
    table = next(d.value for d in at.dataframe if "layout dim" in d.value.columns)
    order = list(table[table.block == "conv_update"].loop)
    assert order.index(loops[0]) < order.index(loops[1])  # the two loops swapped


def test_a_split_that_does_not_divide_its_loop_says_what_it_wastes_and_applies(at):
    _loops_page(at, tuned=False)
    at.selectbox(key="loop_prim").set_value("split").run()
    at.selectbox(key="la_split_block").set_value("conv").run()
    loop = next(o for o in at.selectbox(key="la_split_loop").options if o.startswith("i2"))
    at.selectbox(key="la_split_loop").set_value(loop).run()
    factors = next(t for t in at.text_input if t.key.startswith("la_split_factors"))
    assert not [i.value for i in at.info if "guarded" in i.value]  # the default divides
    factors.input("-1, 100").run()
    runs = math.ceil(112 / 100) * 100
    notes = [i.value for i in at.info if "guarded" in i.value]
    assert len(notes) == 1 and f"{runs} iterations for 112: {100 * (runs - 112) / runs:.1f}% guarded" in notes[0], notes
    assert not _refusals(at) and not at.button(key="apply_loop").disabled
    at.button(key="apply_loop").click().run()
    assert not at.error, [e.value for e in at.error]
    last = session(at).steps[-1]
    assert (last.primitive, last.get("loop"), last.get("factors")) == ("split", "i2", [-1, 100])


def test_the_live_check_is_the_push_that_apply_keeps_and_it_applies_one_step(at, monkeypatch):
    from workbench.engine.session import session as S

    _loops_page(at, tuned=True)
    pushes, replays = record_pushes(monkeypatch)
    applied = []
    one = S.apply_step
    monkeypatch.setattr(S, "apply_step", lambda sch, step: applied.append(step) or one(sch, step))
    at.selectbox(key="loop_prim").set_value("reorder").run()
    _, step, preview = pushes[-1]
    assert step.primitive == "reorder" and applied[-1] == step  # the check applied the step alone
    applied.clear()
    click_reuses_the_preview(at, "apply_loop", pushes, replays)
    assert len(applied) == len(pushes) <= 1  # the next check's one step, if any: the click applied none
    assert [s.primitive for s in session(at).steps] == ["tuned", "reorder"]
