"""A result applied, recorded in its job's folder (issue #45 item 5): the page reads what changed,
and Undo gets the session back as it was, redo stack included, after a reload too."""

import shutil
from dataclasses import replace

import pytest

from workbench.engine.base.errors import SessionError
from workbench.engine.session.session import new_session, replay
from workbench.engine.base.step import Step
from workbench.engine.tuning.jobs.applied import KernelChange, before_state, load_applied, record_applied


def test_the_session_before_comes_back_with_its_redo_stack(tmp_path):
    before = replace(new_session("r18_stem"), redo_stack=(Step.make("preset", "conv", "channels_last"),))
    after = replay(before).push(Step.make("tuned", "conv", "tuned", stage="loop", trace=[[], []], latency_ms=0.5))
    applied = record_applied(tmp_path, before, after.session, [KernelChange("conv", 0.9, 0.5)], partial=True)
    assert load_applied(tmp_path) == applied
    assert (applied.before_key, applied.after_key, applied.actions) == (before.key(), after.session.key(), 1)
    assert applied.text() == "The best so far applied: 1 kernel tuned, conv 0.9000 -> 0.5000 ms (1.80x); the " \
                             "session has 1 action (0 before)."
    back = before_state(tmp_path, applied)
    assert back.session.key() == before.key() and back.session.redo_stack == before.redo_stack
    shutil.rmtree(tmp_path / "before")
    with pytest.raises(SessionError, match="no longer in the job's folder"):
        before_state(tmp_path, applied)


def test_no_record_reads_as_none(tmp_path):
    assert load_applied(tmp_path) is None
    (tmp_path / "applied.json").write_text("{not json")
    assert load_applied(tmp_path) is None
