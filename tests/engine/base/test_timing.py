"""Timing statistics: repeats until quiet (on stub samplers), flags what stays noisy, compares
against the noise; and a real kernel's timing carries all of it."""

import pytest

from workbench.engine.base.timing import MAX_ROUNDS, NOISE, Stats, compare, measure_until_quiet


def sampler(rounds):
    it = iter(rounds)
    calls = []

    def sample():
        calls.append(1)
        return next(it)
    return sample, calls


def test_a_quiet_round_is_measured_once():
    sample, calls = sampler([[1.0, 1.01, 0.99]])
    s = measure_until_quiet(sample)
    assert len(calls) == 1 and s == Stats(1.0, 0.99, 1.01, 3, 1) and not s.noisy


def test_a_noisy_round_is_repeated_and_the_quiet_one_reported():
    sample, calls = sampler([[1.0, 3.0, 1.1], [1.2, 1.21, 1.19]])
    s = measure_until_quiet(sample)
    assert len(calls) == 2 and s.median_ms == 1.2 and s.rounds == 2 and not s.noisy


def test_a_measurement_that_stays_noisy_is_flagged_after_the_cap():
    noisy = [[1.0, 2.0, 1.5]] * (MAX_ROUNDS + 2)
    sample, calls = sampler(noisy)
    s = measure_until_quiet(sample)
    assert len(calls) == MAX_ROUNDS and s.noisy and s.rounds == MAX_ROUNDS
    assert s.relative_spread == pytest.approx(1.0 / 1.5) and s.relative_spread > NOISE


@pytest.mark.parametrize("a, b, want", [
    ([1.0, 1.1], [2.0, 2.1], "1.95x faster"),  # medians 1.05 and 2.05
    ([3.0, 3.3], [1.0, 1.1], "3.00x slower"),
    ([1.0, 1.5], [1.4, 1.6], "within noise"),
])
def test_compare_says_whether_a_difference_is_beyond_the_noise(a, b, want):
    assert compare(Stats.of(a), Stats.of(b)) == want


def test_a_kernel_timing_reports_median_min_spread_and_repeats():
    from workbench.engine.models import zoo
    from workbench.engine.build.program import make_program

    prog = make_program(zoo.load("gmm", m=64, n=64, k=64))
    (t,) = [t for t in prog.build().time(repeat=4, min_ms=1.0) if t.name == "gmm"]
    row = t.row()
    assert row["repeats"] == 4 and 1 <= row["rounds"] <= MAX_ROUNDS
    assert 0 < row["min_ms"] <= row["latency_ms"] and row["spread_ms"] >= 0
    assert row["noisy"] == (row["spread_ms"] / row["latency_ms"] > NOISE)


def test_kernels_are_timed_after_other_thread_pools_went_quiet(monkeypatch):
    """A pool still spinning (NumPy's BLAS after a verification) would hold a core while each
    parallel launch waits for its worker: ``Built.time`` waits for quiet before timing."""
    from workbench.engine.build import program
    from workbench.engine.models import zoo

    log: list[str] = []
    monkeypatch.setattr(program, "wait_for_quiet", lambda *a, **k: log.append("quiet") or 0.0)
    timed = program.measure_until_quiet
    monkeypatch.setattr(program, "measure_until_quiet", lambda sample: log.append("timed") or timed(sample))
    built = program.make_program(zoo.load("gmm", m=16, n=16, k=16)).build()
    timings = built.time(repeat=2, min_ms=0.1)
    assert log[0] == "quiet" and log.count("timed") == len(timings) >= 1
