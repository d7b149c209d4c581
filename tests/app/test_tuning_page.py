"""The Tuning page after a run: the done message names the kernels tuned (not every action the
result adds) and the trial table numbers measurements as the curves' x axis does."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from workbench.engine.step import Step

from tests.app.apptest import session


class _DoneJob:
    """A session tuning job that finished, as the Tuning page sees it: its progress lines and the
    steps its tuned session adds."""

    def __init__(self, folder: Path, rows: list[dict], steps: list[Step]) -> None:
        self.dir, self._rows, self._steps, self.budget, self.started = folder, rows, steps, len(rows), 0.0

    def progress(self) -> list[dict]:
        return self._rows

    def status(self):
        from workbench.engine.tuning.worker import JobStatus

        return JobStatus("done")

    def running(self) -> bool:
        return False

    def tuned_state(self, owner=None):
        return SimpleNamespace(session=SimpleNamespace(steps=tuple(self._steps)))

    def network_report(self) -> list[str]:
        return []  # no kernel slower in the network than measured


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
    at.switch_page("pages/tuning.py").run()
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
    at.switch_page("pages/tuning.py").run()
    assert not at.exception, at.exception
    trials = next(d.value for d in at.get("dataframe") if "trace" in d.value.columns)
    assert list(trials["measurement"]) == [1, 2, 3, 4, 5, 6]  # unique: both candidates' "trial 1" included
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    points = next(t for t in fig["data"] if t.get("name") == "conv: trials")
    assert list(points["x"]) == list(trials["measurement"])
