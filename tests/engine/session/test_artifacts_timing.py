"""What a headless replay reports of its timings: the total with its statistics, and each tuned
kernel's latency against what its tuning measured, judged against the noise."""

import json

import pytest

from workbench.engine.session.artifacts import replay_to
from workbench.engine.session.session import new_session, replay
from workbench.engine.base.step import Step
from workbench.engine.base.timing import Stats, compare
from workbench.engine.tuning.records import plain


def _tuned_gmm(latency_ms: float):
    """A small GMM session whose kernel runs a tuned trace (the expert schedule's), recorded by
    its tuning at ``latency_ms``."""
    state = replay(new_session("gmm", m=64, n=64, k=64))
    trace = plain(state.with_expert_schedule("gmm").tvm_schedule("gmm").trace.as_json())
    return state.push(Step.make("tuned", "gmm", "tuned", stage="loop", trace=trace, latency_ms=latency_ms)).session


@pytest.mark.parametrize("tuned_ms", [1e-9, 1e6])  # far faster, far slower than any replay
def test_a_tuned_kernel_is_compared_with_its_tuning_against_the_noise(tmp_path, tuned_ms):
    report = replay_to(_tuned_gmm(tuned_ms), tmp_path)
    (k,) = [k for k in report.kernels if k["name"] == "gmm"]
    assert k["schedule"] == "tuned" and k["tuned_ms"] == tuned_ms
    replayed = Stats(k["latency_ms"], k["min_ms"], k["min_ms"] + k["spread_ms"], k["repeats"])
    assert k["vs tuned"] == compare(replayed, Stats.of([tuned_ms]))
    assert k["vs tuned"].endswith("slower" if tuned_ms < k["min_ms"] else "faster")
    assert all("vs tuned" not in o for o in report.kernels if o["schedule"] != "tuned")


def test_the_total_carries_min_spread_repeats_and_the_noisy_flag(tmp_path):
    report = replay_to(new_session("gmm", m=64, n=64, k=64), tmp_path)
    ks = report.kernels
    assert report.total_ms == pytest.approx(sum(k["latency_ms"] for k in ks))
    assert report.total_min_ms == pytest.approx(sum(k["min_ms"] for k in ks)) and report.total_min_ms <= report.total_ms
    assert report.total_spread_ms == pytest.approx(sum(k["spread_ms"] for k in ks))
    assert report.repeats == min(k["repeats"] for k in ks) and report.noisy == any(k["noisy"] for k in ks)
    written = json.loads((tmp_path / "report.json").read_text())
    assert {"total_min_ms", "total_spread_ms", "repeats", "noisy"} <= set(written)
