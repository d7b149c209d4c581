"""Joint layout+loop stage and session-level tuning, with tiny budgets (a few measurements)."""

import json

import pytest

from workbench.engine import zoo
from workbench.engine.errors import SessionError, TuneError
from workbench.engine.joint import Candidate, joint_tune, layout_space
from workbench.engine.layout import LayoutBook
from workbench.engine.layouts import apply_actions
from workbench.engine.loops import apply_trace_json
from workbench.engine.metaschedule import read_progress
from workbench.engine.program import DEFAULT_TARGET, make_program
from workbench.engine.session import dumps, loads, new_session, replay
from workbench.engine.tune import budget_split, tune_session


def small_gmm():
    return zoo.load("gmm", m=64, n=64, k=64)


def test_space_of_a_conv_is_alt_templates_with_dividing_tiles():
    g = zoo.load("r18_stem")
    space = layout_space(g, "conv")
    assert space[0] == Candidate(None)
    tiled = [c for c in space[1:] if c.preset == "alt_tiled"]
    assert len(tiled) == len(space) - 1 > 50
    for c in tiled:
        kw = c.kwargs
        assert all(112 % t == 0 for t in kw["tiles"]) and 64 % kw["ot"] == 0 and 3 % kw["it"] == 0


def test_space_of_gmm_is_nkn_and_simple_ops_are_refused():
    g = small_gmm()
    assert {c.preset for c in layout_space(g, "gmm")} == {None, "nkn"}
    with pytest.raises(TuneError, match="not a complex op"):
        layout_space(zoo.load("r18_stem"), "relu")


@pytest.mark.parametrize("search", ["model", "random"])
def test_joint_tune_scores_candidates_then_tunes_loops(tmp_path, search):
    g = small_gmm()
    prog_path = tmp_path / "progress.jsonl"
    res = joint_tune(g, LayoutBook(), "gmm", DEFAULT_TARGET, tmp_path / "wd", budget=6, joint_fraction=0.67,
                     per_candidate=2, search=search, progress_path=prog_path, seed=1)
    assert len(res.scores) == 2 and res.scores[0][0] == Candidate(None)
    assert res.best_ms == min(s for _, s in res.scores if s is not None) or res.best_ms <= min(
        s for _, s in res.scores if s is not None)
    lines = read_progress(prog_path)
    assert {ln["stage"] for ln in lines} == {"joint", "loop"}
    assert {ln["layout"] for ln in lines if ln["stage"] == "joint"} == {c.label for c, _ in res.scores}
    # the tuned trace re-applies on the chosen layout's kernel and the program is still correct
    book = apply_actions(g, LayoutBook(), res.best.actions(g, "gmm"))
    prog = make_program(g, book)
    prog = prog.with_funcs({"gmm": apply_trace_json(prog.funcs["gmm"], res.trace).mod["main"]})
    assert prog.build().verify().ok


def test_budget_split_gives_every_op_its_minimum():
    got = budget_split({"big": 100.0, "tiny": 1.0}, 10, minimum=2)
    assert got["tiny"] == 2 and sum(got.values()) >= 10


def test_tune_session_appends_replayable_tuned_actions(tmp_path):
    s = new_session("gmm", m=64, n=64, k=64)
    tuned = tune_session(s, "loop", 3, tmp_path)
    kinds = [a["kind"] for a in tuned.actions]
    assert kinds and set(kinds) == {"tuned"}
    again = loads(dumps(tuned))  # a replay needs no tuning
    state = replay(again)
    assert state.scheduled_program().build().verify().ok
    assert json.loads(dumps(again))["actions"][0]["trace"]


def test_bad_stage_and_budget_are_refused(tmp_path):
    s = new_session("gmm", m=64, n=64, k=64)
    with pytest.raises(TuneError, match="stage"):
        tune_session(s, "both", 4, tmp_path)
    with pytest.raises(TuneError, match="budget"):
        tune_session(s, "loop", 0, tmp_path)


def test_a_tuned_action_with_a_foreign_trace_is_refused():
    s = new_session("gmm", m=64, n=64, k=64)
    with pytest.raises(SessionError, match="action 0"):
        s.push({"kind": "tuned", "op": "nope", "trace": [[], []]})


def test_model_guided_pick_prefers_what_the_cost_model_predicts_fastest():
    """With enough scores the XGBoost model picks among unscored candidates; one that looks like
    the fastest scored candidates should be preferred over one like the slowest."""
    import random

    from workbench.engine.joint import Candidate, _pick

    fast = [Candidate("alt_tiled", (("tiles", (4, 16)), ("ot", 16), ("it", 3))),
            Candidate("alt_tiled", (("tiles", (4, 8)), ("ot", 16), ("it", 3))),
            Candidate("alt_tiled", (("tiles", (8, 16)), ("ot", 16), ("it", 3)))]
    slow = [Candidate("alt_tiled", (("tiles", (1, 1)), ("ot", 1), ("it", 1))),
            Candidate("alt_tiled", (("tiles", (1, 2)), ("ot", 1), ("it", 1)))]
    scored = {fast[0]: 1.0, fast[1]: 1.1, slow[0]: 50.0, slow[1]: 45.0}
    space = list(scored) + [fast[2], Candidate("alt_tiled", (("tiles", (2, 1)), ("ot", 1), ("it", 1)))]
    picks = {_pick(space, scored, random.Random(seed), "model") for seed in range(10)}
    assert fast[2] in picks
    assert all(p not in scored for p in picks)
