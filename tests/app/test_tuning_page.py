"""The Tuning page: a run in a worker with its status and budget while it runs; after a run the
done message names the kernels tuned (not every action the result adds) and the trial table
numbers measurements as the curves' x axis does; a result shows its speed-ups against its
baselines, Apply turns into "applied" with an Undo that restores the session, and a stopped run's
best so far applies (or the page says why not)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.app.apptest import home, session, start, tune_loops
from tests.engine.tuning.job_helpers import job_folder, loop_records, rows
from workbench.engine.base.step import Step
from workbench.engine.base.timing import Stats
from workbench.engine.session.session import replay
from workbench.engine.tuning.jobs.baselines import KernelBaselines


class _DoneJob:
    """A session tuning job that finished, as the Tuning page sees it: its progress lines and the
    steps its tuned session adds."""

    def __init__(self, folder: Path, rows: list[dict], steps: list[Step]) -> None:
        self.dir, self._rows, self._steps, self.budget, self.started = folder, rows, steps, len(rows), 0.0

    def progress(self) -> list[dict]:
        return self._rows

    def status(self):
        from workbench.engine.tuning.jobs.worker import JobStatus

        return JobStatus("done")

    def running(self) -> bool:
        return False

    def tuned_state(self, owner=None):
        return SimpleNamespace(session=SimpleNamespace(steps=tuple(self._steps)))

    def network_report(self) -> list[str]:
        return []  # no kernel slower in the network than measured

    def baselines(self):
        return None  # not timed against its baselines

    stage = "joint"


def _joint_r18_stem() -> tuple[list[dict], list[Step]]:
    """What the joint stage on r18_stem with a budget of 6 gives: two layout candidates of conv
    scored (each one's short tuning counts its trials from 1), the loop stage on the better one;
    the result is conv's tuned step (its layout inside) and the pad kernel's analytic schedule."""
    tiled = "alt_tiled(tiles=[4, 112], ot=16, it=3)"
    rows = [{"task": "conv", "stage": "joint", "trial": 1, "layout": "default", "latency_ms": 0.91},
            {"task": "conv", "stage": "joint", "trial": 1, "layout": tiled, "latency_ms": 0.70}]
    rows += [{"task": "conv", "stage": "loop", "trial": t, "layout": tiled, "latency_ms": 0.6276 + (t - 2) / 100}
             for t in (2, 3, 4, 5)]
    layout = {"kind": "layout", "tensor": "conv", "preset": "alt_tiled",
              "params": {"tiles": [4, 112], "ot": 16, "it": 3}}
    conv = Step.make("tuned", "conv", "tuned", stage="joint+loop", layouts=[layout], trace=[[], []],
                     latency_ms=0.6276, measurements=6)
    pad = [Step.make("loop", "pad", p, block="pad") for p in ("reorder", "fuse", "parallel", "vectorize")]
    return rows, [conv, *pad]


def test_a_joint_result_counts_its_tuned_kernel_not_the_actions_of_kernels_it_did_not_tune(at, tmp_path):
    rows, steps = _joint_r18_stem()
    at.session_state["tune_job"] = _DoneJob(tmp_path / "job", rows, steps)
    at.session_state["tune_base"] = (session(at).key(), len(session(at).steps))
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    (done,) = [m.value for m in at.success if m.value.startswith("Tuning done")]
    assert done.startswith("Tuning done: 1 tuned kernel: conv 0.6276 ms."), done
    assert "nan" not in done and "pad 0" not in done and "5 tuned kernels" not in done
    assert ("Applying it adds 5 actions: conv's tuned schedule in layout alt_tiled(tiles=[4, 112], ot=16, it=3); "
            "pad's schedule (4 loop actions)") in done  # as many as the sidebar counts once applied
    assert at.button(key="tune_apply")


def test_the_trial_table_and_the_curves_number_the_runs_measurements_alike(at, tmp_path):
    rows, steps = _joint_r18_stem()
    at.session_state["tune_job"] = _DoneJob(tmp_path / "job", rows, steps)
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    trials = next(d.value for d in at.get("dataframe") if "trace" in d.value.columns)
    assert list(trials["measurement"]) == [1, 2, 3, 4, 5, 6]  # unique: both candidates' "trial 1" included
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    points = next(t for t in fig["data"] if t.get("name") == "conv: trials")
    assert list(points["x"]) == list(trials["measurement"])


########## Applied, Undo, a stopped run's best so far ##########

_TIMED = KernelBaselines("conv", Stats(0.63, 0.62, 0.65, 3), {"start": Stats(0.91, 0.90, 0.93, 3),
                                                              "expert": Stats(0.64, 0.60, 0.70, 3),
                                                              "library": Stats(1.26, 1.20, 1.30, 3)},
                         "PyTorch (channels-last)")


def _keys(at) -> list[str]:
    return [b.key for b in at.button]


def _done_loop_run(at, folder: Path):
    """The tab's session with a redo stack (an action undone), and a finished loop-only run from it
    whose result tunes conv and was timed against its baselines."""
    start = replace(session(at), redo_stack=(Step.make("preset", "conv", "channels_last"),))
    at.session_state["state"] = replay(start)
    tuned = replace(start, steps=(Step.make("tuned", "conv", "tuned", stage="loop", trace=[[], []], latency_ms=0.7,
                                            measurements=2),), redo_stack=())
    job = job_folder(folder, start, "loop", rows("conv", [0.8, 0.7]), owner=at.session_state["wid"],
                     result={"session": tuned.to_json(), "network": {}, "baselines": [_TIMED.to_json()]})
    at.session_state["tune_job"] = job
    at.session_state["tune_base"] = (start.key(), 0)
    return start, tuned


def test_a_result_shows_its_speed_up_against_each_baseline_with_the_spread(at, tmp_path):
    _done_loop_run(at, tmp_path / "job")
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.get("dataframe") if "vs starting schedule" in d.value.columns)
    conv = table[table["kernel"] == "conv"].iloc[0]
    assert conv["tuned ms"] == 0.63 and conv["spread"] == "5%"
    assert conv["vs starting schedule"] == "1.44x (spread 3%)"
    assert conv["vs expert schedule"] == "1.02x, within noise (spread 16%)"  # their samples overlap
    assert conv["vs library"] == "2.00x (spread 8%) (PyTorch (channels-last))"


def test_after_apply_the_page_says_applied_with_undo_and_undo_restores_the_session(at, tmp_path):
    start, tuned = _done_loop_run(at, tmp_path / "job")
    at.switch_page("../pages/tuning.py").run()
    at.button(key="tune_apply").click().run()
    assert not at.exception, at.exception
    assert session(at).key() == tuned.key()
    applied = [m.value for m in at.success if m.value.startswith("Applied")]
    assert applied == ["Applied: 1 kernel tuned, conv 0.9100 -> 0.6300 ms (1.44x); the session has 1 action "
                       "(0 before)."]
    assert "tune_undo" in _keys(at) and "tune_apply" not in _keys(at)
    assert not [m for m in at.success if m.value.startswith("Tuning done")]

    at.button(key="tune_undo").click().run()
    assert not at.exception, at.exception
    assert session(at).key() == start.key() and session(at).redo_stack == start.redo_stack  # as it was, redo included
    assert "tune_apply" in _keys(at) and "tune_undo" not in _keys(at)

    # after a reload the tab no longer holds the state from before: the job's folder has it
    at.button(key="tune_apply").click().run()
    del at.session_state["tune_before"]
    at.button(key="tune_undo").click().run()
    assert not at.exception, at.exception
    assert session(at).key() == start.key() and session(at).redo_stack == start.redo_stack


def test_a_stopped_loop_runs_best_so_far_applies(at, tmp_path):
    start = session(at)
    job = job_folder(tmp_path / "job", start, "loop", rows("conv", [0.912, 0.728]), owner=at.session_state["wid"],
                     stopped=True)
    loop_records(job.dir, at.session_state["state"], [("conv", [0.000912]), ("conv", [0.000728])])
    at.session_state["tune_job"] = job
    at.session_state["tune_base"] = (start.key(), 0)
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    infos = " ".join(m.value for m in at.info)
    assert "The run stopped after 2 measurements, before its result." in infos
    assert "Its best so far: conv 0.7280 ms." in infos
    assert "tune_time_baselines" in _keys(at)  # a stopped run is timed against its baselines on request
    at.button(key="tune_apply").click().run()
    assert not at.exception, at.exception
    (step,) = [s for s in session(at).steps if s.kind == "tuned"]
    assert step.target == "conv" and round(step.get("latency_ms"), 6) == 0.728
    assert [m.value for m in at.success if "applied" in m.value] == [
        "The best so far applied: 1 kernel tuned, conv 0.7280 ms (before: not timed); the session has "
        f"{len(session(at).steps)} actions (0 before)."]
    assert "tune_undo" in _keys(at)


def test_a_stopped_joint_run_says_why_its_best_cannot_be_applied(at, tmp_path):
    start = session(at)
    at.session_state["tune_job"] = job_folder(tmp_path / "job", start, "joint", rows("conv", [0.9], stage="joint"),
                                              owner=at.session_state["wid"], stopped=True)
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    (why,) = [m.value for m in at.warning if "cannot be applied" in m.value]
    assert why.startswith("Its best so far cannot be applied: a joint run that ended before its result")
    assert "tune_apply" not in _keys(at)


def test_a_stopped_runs_baselines_timed_later_show_and_give_the_latency_before(at, tmp_path):
    start = session(at)
    job = job_folder(tmp_path / "job", start, "loop", rows("conv", [0.7]), owner=at.session_state["wid"], stopped=True)
    loop_records(job.dir, at.session_state["state"], [("conv", [0.0007])])
    # what a baselines job on this run leaves in its folder (and one of an earlier run, which does not count)
    (job.dir / "baselines").mkdir()
    timed = {"baselines": [_TIMED.to_json()], "started": job.started}
    (job.dir / "baselines" / "result.json").write_text(json.dumps({**timed, "started": job.started - 60}))
    at.session_state["tune_job"] = job
    at.session_state["tune_base"] = (start.key(), 0)
    at.switch_page("../pages/tuning.py").run()
    assert "tune_time_baselines" in _keys(at)
    assert not [d for d in at.get("dataframe") if "vs starting schedule" in d.value.columns]
    (job.dir / "baselines" / "result.json").write_text(json.dumps(timed))
    at.run()
    assert not at.exception, at.exception
    assert "tune_time_baselines" not in _keys(at)
    table = next(d.value for d in at.get("dataframe") if "vs starting schedule" in d.value.columns)
    assert list(table["vs starting schedule"]) == ["1.44x (spread 3%)"]
    at.button(key="tune_apply").click().run()
    assert any(m.value.startswith("The best so far applied: 1 kernel tuned, conv 0.9100 -> 0.6300 ms (1.44x)")
               for m in at.success), [m.value for m in at.success]


@pytest.mark.tuning
def test_a_real_loop_run_is_timed_against_its_baselines_applied_and_undone(at):
    """Loop-only stage, 2 measurements on C1D: the worker times the result against its baselines
    at its end; Apply says the latency before and after, Undo gives the session back."""
    job = tune_loops(at, "c1d", 2)
    assert job.status().state == "done", job.status()
    before = session(at)
    at.run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.get("dataframe") if "vs starting schedule" in d.value.columns)
    assert list(table["kernel"]) == ["conv"] and table["tuned ms"].iloc[0] > 0
    assert table["vs library"].iloc[0].endswith(")") and "PyTorch" in table["vs library"].iloc[0]
    at.button(key="tune_apply").click().run()
    (applied,) = [m.value for m in at.success if m.value.startswith("Applied")]
    assert applied.startswith("Applied: 1 kernel tuned, conv ") and " -> " in applied, applied
    at.button(key="tune_undo").click().run()
    assert session(at).key() == before.key() and "tune_apply" in _keys(at)


@pytest.mark.tuning
def test_tuning_runs_in_a_worker_shows_curves_and_applies_the_result(at):
    """Loop-only stage, 2 measurements, on the small C1D model: start, watch, apply."""
    home(at).selectbox(key="model_pick").set_value("c1d").run()
    at.switch_page("../pages/tuning.py").run()
    at.radio(key="tune_stage").set_value("loop").run()
    at.number_input(key="tune_budget").set_value(2).run()
    at.button(key="tune_start").click().run()
    job = at.session_state["tune_job"]
    assert job.wait(timeout=240).state == "done", job.status()
    rows = job.progress()
    assert len(rows) == 2 and all(r["stage"] == "loop" for r in rows)
    at.run()
    assert not at.exception, at.exception
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert any(t.get("name", "").endswith(": best") for t in fig["data"])
    at.button(key="tune_apply").click().run()
    tuned = [a for a in session(at).steps if a.kind == "tuned"]
    assert tuned and tuned[0].target == "conv" and tuned[0].get("latency_ms") > 0


class _FinishedJob:
    """A tuning job that already ran, as the Tuning page sees it: its progress lines, its status."""

    def __init__(self, folder: Path, rows: list[dict], budget: int = 8, started: float = 0.0,
                 running: bool = False) -> None:
        self.dir, self._rows, self.budget, self.started, self._running = folder, rows, budget, started, running

    def progress(self) -> list[dict]:
        return self._rows

    def status(self):
        from workbench.engine.tuning.jobs.worker import JobStatus

        return JobStatus("running" if self._running else "stopped")

    def running(self) -> bool:
        return self._running

    def tuned_state(self, owner=None):
        return None


def test_tuning_status_shows_each_tasks_best_and_their_sum_not_the_fastest_kernel(at, tmp_path):
    from workbench.engine.tuning.progress import summarize_progress

    rows = [{"task": "pad", "stage": "loop", "latency_ms": 0.001, "best_ms": 0.001},
            {"task": "conv", "stage": "loop", "latency_ms": 0.5, "best_ms": 0.5},
            {"task": "conv", "stage": "loop", "latency_ms": None, "best_ms": 0.5}]
    at.session_state["tune_job"] = _FinishedJob(tmp_path / "job", rows)
    at.session_state["tune_tasks"] = ["pad", "conv", "relu"]
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    status = next(m.value for m in at.markdown if "best per task summed" in m.value)
    assert summarize_progress(rows, ["pad", "conv", "relu"]).headline() in status
    assert "0.5010 ms over 2 tasks" in status and "1 of 3 tasks without a result yet" in status
    assert "3 measurements" in status and "1 failed candidate (skipped)" in status
    (bests,) = [d.value for d in at.get("dataframe") if "best ms" in d.value.columns]
    assert dict(zip(bests["task"], bests["best ms"].fillna(-1))) == {"pad": 0.001, "conv": 0.5, "relu": -1}
    trials = lambda: next(d.value for d in at.get("dataframe") if "trace" in d.value.columns)  # noqa: E731
    assert len(trials()) == 3
    at.radio(key="trials_outcome").set_value("failed").run()
    assert list(trials()["task"]) == ["conv"] and trials()["latency ms"].isna().all()
    at.radio(key="trials_outcome").set_value("all").run()
    at.multiselect(key="trials_tasks").set_value(["pad"]).run()
    assert list(trials()["task"]) == ["pad"]


def test_a_running_tuning_shows_measurements_of_its_budget_and_the_time_left(at, tmp_path):
    import time

    now = time.time()
    rows = [{"task": "conv", "stage": "loop", "latency_ms": 0.5 - i / 10, "time": now - 30 + 10 * i} for i in range(3)]
    at.session_state["tune_job"] = _FinishedJob(tmp_path / "job", rows, budget=12, started=now - 40, running=True)
    at.switch_page("../pages/tuning.py").run()
    assert not at.exception, at.exception
    status = next(m.value for m in at.markdown if "best per task summed" in m.value)
    assert "3 of 12 measurements" in status and "elapsed" in status and " left" in status, status


def test_the_joint_budget_says_how_many_layouts_it_scores_and_survives_a_page_switch(at):
    at.switch_page("../pages/tuning.py").run()
    at.radio(key="tune_stage").set_value("joint").run()
    at.number_input(key="tune_budget").set_value(2).run()  # the least: still the current layout and the prior's best
    assert not any("scores only one" in w.value for w in at.warning), [w.value for w in at.warning]
    assert any("Layout candidates scored: conv 2 of" in c.value for c in at.caption), [c.value for c in at.caption]
    at.number_input(key="tune_budget").set_value(77).run()
    assert any("Layout candidates scored: conv 23 of" in c.value for c in at.caption), [c.value for c in at.caption]
    at.switch_page("../pages/graph.py").run()  # the entry script, as a browser runs it on every page (the Graph page here)
    assert not at.number_input and at.session_state["tune_budget"] == 77
    at.switch_page("../pages/tuning.py").run()
    assert at.number_input(key="tune_budget").value == 77 and at.radio(key="tune_stage").value == "joint"
