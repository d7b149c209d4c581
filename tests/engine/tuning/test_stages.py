"""Session-level tuning: results become replayable ``tuned`` steps; bad requests are refused."""

import json

import pytest

from workbench.engine.errors import SessionError, TuneError
from workbench.engine.session import dumps, loads, new_session, replay
from workbench.engine.step import Step
from workbench.engine.tuning.stages import tune_session


@pytest.fixture
def gmm_session():
    return new_session("gmm", m=64, n=64, k=64)


def test_tune_session_appends_replayable_tuned_steps(tmp_path, gmm_session):
    tuned = tune_session(gmm_session, "loop", 3, tmp_path)
    assert tuned.steps and {s.kind for s in tuned.steps} == {"tuned"}
    assert tuned.steps[0].get("stage") == "loop" and tuned.steps[0].get("measurements") == 3
    again = loads(dumps(tuned))  # a replay needs no tuning
    assert replay(again).scheduled_program().build().verify().ok
    assert json.loads(dumps(again))["actions"][0]["trace"]


def test_bad_stage_and_budget_are_refused(tmp_path, gmm_session):
    with pytest.raises(TuneError, match="stage"):
        tune_session(gmm_session, "both", 4, tmp_path)
    with pytest.raises(TuneError, match="budget"):
        tune_session(gmm_session, "loop", 0, tmp_path)
    with pytest.raises(TuneError, match="at least 2 \\(two each\\)"):
        tune_session(gmm_session, "joint", 1, tmp_path)


def test_a_tuned_step_with_a_foreign_trace_is_refused(gmm_session):
    with pytest.raises(SessionError, match="action 0"):
        replay(gmm_session).push(Step.make("tuned", "nope", "tuned", trace=[[], []]))
