"""Timing statistics: repeats until quiet (on stub samplers), flags what stays noisy, compares
against the noise; and a real kernel's timing carries all of it."""

import pytest

from workbench.engine.timing import MAX_ROUNDS, NOISE, Stats, compare, measure_until_quiet


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
    from workbench.engine import zoo
    from workbench.engine.program import make_program

    prog = make_program(zoo.load("gmm", m=64, n=64, k=64))
    (t,) = [t for t in prog.build().time(repeat=4, min_ms=1.0) if t.name == "gmm"]
    row = t.row()
    assert row["repeats"] == 4 and 1 <= row["rounds"] <= MAX_ROUNDS
    assert 0 < row["min_ms"] <= row["latency_ms"] and row["spread_ms"] >= 0
    assert row["noisy"] == (row["spread_ms"] / row["latency_ms"] > NOISE)
