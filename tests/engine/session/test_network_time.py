"""The whole network in time: checked against the reference first, then its latency, its kernels
in call order, by op type, conversions against compute, and the frameworks beside it."""

from __future__ import annotations

import os

import psutil
import pytest

from tests.engine.session import timer_makers
from workbench.engine.session import network_time
from workbench.engine.base.errors import BuildError
from workbench.engine.session.network_time import CONVERSION, RTOL, time_network
from workbench.engine.layout.presets import preset_actions
from workbench.engine.session.session import new_session, replay

#: a small BERT-tiny layer: GMMs, transposes, softmax, layer norms; NKN on ``q`` adds a conversion kernel
SMALL_BERT = dict(seq=16, hidden=32, heads=2)


@pytest.fixture(autouse=True)
def unsettled(monkeypatch):
    """No wait for a quiet machine before each sample: these tests check what is timed, not how fast."""
    monkeypatch.setattr(network_time, "SETTLE_S", 0.0)


@pytest.fixture(scope="module")
def bert_nkn():
    state = replay(new_session("bert_tiny_layer", **SMALL_BERT))
    for step in preset_actions(state.graph, "nkn", "q"):
        state = state.push(step)
    return state


def test_the_network_is_checked_then_timed_kernel_by_kernel_in_call_order(bert_nkn):
    got = time_network(bert_nkn)
    plan = bert_nkn.program.plan
    ours = got.contenders[0]
    assert ours.name.startswith("ours") and ours.max_rel_error < RTOL and ours.stats.median_ms > 0
    assert len(got.contenders) == 1  # a model of the op library: no framework runs it
    # every kernel of the plan once, in the plan's order (the network calls them so), back to back
    assert [k.kernel for k in got.kernels] == [k.name for k in plan.kernels]
    assert got.kernels[0].start_ms == 0
    for a, b in zip(got.kernels, got.kernels[1:]):
        assert b.start_ms == pytest.approx(a.start_ms + a.ms)
    assert all(k.stats.repeats == got.runs >= network_time.MIN_RUNS for k in got.kernels)
    # the conversions the layout needs are kernels of their own, typed as conversions
    conversions = {k.name for k in plan.kernels if k.conversion is not None}
    assert conversions and {k.kernel for k in got.kernels if k.conversion} == conversions
    assert {k.op_type for k in got.kernels} >= {"GMM", CONVERSION, "softmax"}


def test_time_by_op_type_and_the_split_add_up(bert_nkn):
    got = time_network(bert_nkn, frameworks=False)
    rows = got.by_type()
    assert sum(r["kernels"] for r in rows) == len(got.kernels)
    assert sum(r["ms"] for r in rows) == pytest.approx(got.kernels_ms)
    assert [r["ms"] for r in rows] == sorted((r["ms"] for r in rows), reverse=True)
    assert sum(r["share"] for r in rows) == pytest.approx(1)
    split = got.split()
    assert split["compute"] + split[CONVERSION] == pytest.approx(got.kernels_ms)
    assert split[CONVERSION] == pytest.approx(sum(k.ms for k in got.kernels if k.conversion)) and split[CONVERSION] > 0
    assert split["outside kernels"] >= 0


def test_a_network_that_differs_from_the_reference_is_not_timed(monkeypatch):
    """Correctness first: wrong outputs raise, and nothing is timed."""
    state = replay(new_session("gmm", m=32, n=32, k=32))
    real = network_time.build_network

    class Wrong:
        def __init__(self, net):
            self.net = net

        def run(self, values):
            return {t: v + 1.0 for t, v in self.net.run(values).items()}

    def timed(*_):
        raise AssertionError("timed a wrong network")

    monkeypatch.setattr(network_time, "build_network", lambda *a: Wrong(real(*a)))
    monkeypatch.setattr(network_time, "_latencies", timed)
    with pytest.raises(BuildError, match="differ from the reference"):
        time_network(state)


@pytest.mark.slow
def test_a_built_in_network_is_timed_beside_pytorch_and_onnx_runtime():
    """A zoo network (a small BERT layer, from its torch.nn module): PyTorch eager and ONNX Runtime
    (on the module exported to ONNX) run the same input, and their outputs match the reference."""
    state = replay(new_session("bert_layer", seq=8, hidden=64, heads=2))
    got = time_network(state)
    names = [c.name for c in got.contenders]
    assert names == ["ours (compiled network)", "PyTorch eager", "ONNX Runtime"]
    for c in got.contenders:
        assert c.stats is not None and c.stats.median_ms > 0, c.note
        assert c.max_rel_error is not None and c.max_rel_error < network_time.FRAMEWORK_RTOL and not c.note


@pytest.fixture(scope="module")
def gmm():
    return replay(new_session("gmm", m=32, n=32, k=32))


def _pid(path) -> int:
    return int(path.read_text())


def test_the_frameworks_run_in_a_process_of_their_own_and_one_that_fails_is_one_line(gmm, monkeypatch, tmp_path):
    """Each framework is made and sampled in the sidecar, never in this (the app's) process; its
    samples interleave with ours'; one that cannot be made, or whose outputs differ, says why in a
    line while ours and the others are timed; the sidecar is gone once the timing returns."""
    here, wrong = tmp_path / "here", tmp_path / "wrong"
    specs = [("Here", timer_makers.pid_timer, (str(here),)), ("Broken", timer_makers.failing_timer, ()),
             ("Wrong", timer_makers.pid_timer, (str(wrong), 0.5))]
    monkeypatch.setattr(network_time, "_framework_specs", lambda *_: specs)
    got = time_network(gmm)
    assert [c.name for c in got.contenders] == [network_time.OURS, "Here", "Broken", "Wrong"]
    ours, ok, broken, differs = got.contenders
    assert ours.stats.median_ms > 0 and ok.stats.median_ms > 0 and ok.max_rel_error == 0 and not ok.note
    assert ours.stats.repeats == ok.stats.repeats == differs.stats.repeats  # one sample each per round
    assert _pid(here) == _pid(wrong) != os.getpid()  # one sidecar, not this process
    assert not psutil.pid_exists(_pid(here))  # shut down
    assert broken.stats is None and broken.note == "RuntimeError: no such provider"
    assert differs.max_rel_error == 0.5 and differs.note == "its outputs differ from the reference by 5.0e-01"


def test_a_framework_that_crashes_its_process_is_one_line_and_the_next_gets_a_new_one(gmm, monkeypatch, tmp_path):
    specs = [("Dies", timer_makers.dying_timer, ()), ("Here", timer_makers.pid_timer, (str(tmp_path / "pid"),))]
    monkeypatch.setattr(network_time, "_framework_specs", lambda *_: specs)
    ours, dead, ok = time_network(gmm).contenders
    assert ours.stats.median_ms > 0
    assert dead.stats is None and dead.note == "its timing process ended (EOFError)"
    assert ok.stats.median_ms > 0 and _pid(tmp_path / "pid") != os.getpid()


def test_the_sidecar_is_shut_down_when_timing_fails(tmp_path):
    def ours() -> float:
        raise RuntimeError("ours broke")

    with pytest.raises(RuntimeError, match="ours broke"):
        network_time._timed(ours, [("Here", timer_makers.pid_timer, (str(tmp_path / "pid"),))], lambda _: None)
    assert not psutil.pid_exists(_pid(tmp_path / "pid"))
