"""The smoothed time left of a tuning run (``eta``): polled as the page polls, on synthetic
measurement times, it never grows while the pace holds, and follows a pace that changes by more
than 30%."""

import random

import pytest
from hypothesis import given, strategies as st

from workbench.engine.tuning.eta import RATE_CHANGE, moving_rate, smoothed_eta
from workbench.engine.tuning.progress import pace


def _polls(times: list[float], budget: int, every: float = 2.0) -> list[float | None]:
    """The time left the page shows at each of its polls (every ``every`` s), each seeing the
    measurements written by then."""
    shown, now = [], min(times)
    while now <= max(times):
        seen = [t for t in times if t <= now]
        shown.append(smoothed_eta(seen, budget).left_s(now))
        now += every
    return shown


def _batches(start: float, sizes: list[int], gaps: list[float]) -> list[float]:
    """MetaSchedule's pattern: each batch's lines written at once, ``gaps[i]`` s after the last."""
    times, t = [], start
    for size, gap in zip(sizes, gaps):
        t += gap
        times += [t] * size
    return times


def _non_increasing(values: list[float | None]) -> bool:
    known = [v for v in values if v is not None]
    return all(b <= a + 1e-9 for a, b in zip(known, known[1:]))


def test_a_steady_pace_counts_down_evenly():
    times = [100.0 + 3.0 * i for i in range(20)]  # one measurement every 3 s
    eta = smoothed_eta(times, budget=50)
    assert eta.rate_s == pytest.approx(3.0)
    assert eta.left_s(times[-1]) == pytest.approx(30 * 3.0)
    shown = _polls(times, 50)
    assert _non_increasing(shown) and shown[-1] == pytest.approx(30 * 3.0, abs=2.0)


def test_batches_of_jittery_length_never_move_the_time_left_up():
    """Batches of 8 lines at once, each batch 20-30 s (within 30% of their mean): the shown time
    left only counts down, and ends near what the batches' pace says is left."""
    rng = random.Random(3)
    gaps = [rng.uniform(20.0, 30.0) for _ in range(10)]
    times = _batches(1000.0, [1] + [8] * 9, gaps)  # the expert seed alone first, then MetaSchedule's batches
    budget = 128
    shown = _polls(times, budget)
    assert _non_increasing(shown)
    left = budget - len(times)
    assert shown[-1] == pytest.approx(left * 25.0 / 8, rel=0.3)  # 3.1 s per measurement on average


def test_the_old_pace_jumps_and_the_smoothed_one_does_not():
    """The pattern behind the report: the count since the job started (queue, TVM's import)
    and bursts of lines; the elapsed/done estimate moves up and down, the smoothed one only down."""
    times = _batches(0.0, [1, 8, 8, 8, 8], [40.0, 24.0, 30.0, 20.0, 26.0])
    naive = [(t - 0.0) / n * (64 - n) for n, t in enumerate(times, start=1)]
    assert not _non_increasing(naive)
    assert _non_increasing(_polls(times, 64))


def test_a_pace_that_changes_by_more_than_30_percent_is_followed():
    """1 s per measurement, then 3 s (a bigger kernel's share): the time left grows, and once the
    window holds the new pace only, the held rate is within 30% of it."""
    first = [float(i) for i in range(20)]
    slower = [19.0 + 3.0 * i for i in range(1, 21)]
    budget = 100
    before = smoothed_eta(first, budget)
    assert before.rate_s == pytest.approx(1.0)
    after = smoothed_eta(first + slower, budget)
    assert moving_rate(first + slower) == pytest.approx(3.0)
    assert 3.0 / (1 + RATE_CHANGE) <= after.rate_s <= 3.0
    assert after.left_s(slower[-1]) == pytest.approx((budget - 40) * 3.0, rel=RATE_CHANGE)
    assert after.left_s(slower[-1]) > before.left_s(first[-1])


def test_no_estimate_before_two_distinct_times_and_none_left_past_the_finish():
    assert smoothed_eta([], 10).left_s(5.0) is None
    assert smoothed_eta([4.0] * 8, 10).left_s(5.0) is None  # one batch: no pace yet
    eta = smoothed_eta([0.0, 1.0], 4)
    assert eta.finish == pytest.approx(3.0) and eta.left_s(10.0) == 0.0
    assert moving_rate([0.0] * 8 + [16.0] * 8) == pytest.approx(2.0)  # the batch counts at its time


def test_pace_counts_this_runs_lines_only_and_says_when_it_is_finishing():
    rows = [{"time": t} for t in (1.0, 2.0, 50.0, 52.0, 54.0)]  # two lines from an earlier run
    p = pace(rows, 4, started=40.0, now=55.0)
    assert (p.done, p.elapsed_s) == (3, 15.0) and p.left_s == pytest.approx(1.0)
    assert "about" in p.text()
    assert "finishing" in pace(rows, 4, started=40.0, now=60.0).text()
    assert pace(rows, 3, started=40.0, now=60.0).left_s is None  # the budget is spent


@given(rate=st.floats(0.5, 20.0), jitter=st.lists(st.floats(-0.1, 0.1), min_size=3, max_size=40),
       extra=st.integers(0, 50))
def test_within_10_percent_of_a_steady_pace_the_time_left_never_grows(rate, jitter, extra):
    times, t = [], 0.0
    for j in jitter:
        t += rate * (1 + j)
        times.append(t)
    assert _non_increasing(_polls(times, len(times) + extra, every=rate / 2))
