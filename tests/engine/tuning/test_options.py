"""TuneOptions checks its values; budget_shares is the one budget splitter."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.engine.base.errors import TuneError
from workbench.engine.tuning.options import TuneOptions, budget_shares


@pytest.mark.parametrize("weights, budget, minimum, expected", [
    ([1, 1, 1], 3, 1, [1, 1, 1]),
    ([3_000, 1_000], 16, 1, [12, 4]),
    ([100.0, 1.0], 10, 2, [8, 2]),  # the minimum first, then in proportion: never over the budget
    ([0, 0], 5, 1, [3, 2]),  # a zero weight counts as one
])
def test_budget_shares(weights, budget, minimum, expected):
    assert budget_shares(weights, budget, minimum) == expected


@given(st.lists(st.integers(0, 10 ** 9), min_size=1, max_size=6), st.integers(0, 40), st.integers(1, 3))
def test_budget_shares_sum_to_the_budget_with_the_minimum_each(weights, spare, minimum):
    budget = minimum * len(weights) + spare
    shares = budget_shares(weights, budget, minimum)
    assert sum(shares) == budget and min(shares) >= minimum
    w = [max(x, 1) for x in weights]  # a zero weight counts as one
    assert all(shares[i] >= shares[j] for i in range(len(w)) for j in range(len(w)) if w[i] > w[j])


def test_a_budget_below_the_minimums_is_refused():
    with pytest.raises(TuneError, match="cannot give each of 3 kernels one"):
        budget_shares([1, 1, 1], 2)
    with pytest.raises(TuneError, match="cannot give each of 2 kernels 2"):
        budget_shares([1, 1], 3, minimum=2)


def test_options_refuse_bad_values_and_derive_seeds():
    with pytest.raises(TuneError, match="search"):
        TuneOptions(search="greedy")
    with pytest.raises(TuneError, match="num_trials_per_iter"):
        TuneOptions(num_trials_per_iter=0)
    assert TuneOptions(seed=3).seed_plus(2) == 5 and TuneOptions(seed=None).seed_plus(2) is None


def test_loss_weights_follow_the_time_a_kernel_loses_not_its_flops():
    from workbench.engine.tuning.options import LOSS_FLOOR, loss_weights

    # a: many FLOPs at the best rate; b: as many FLOPs, twice as slow; c: few FLOPs, slow
    w = loss_weights([200.0, 200.0, 10.0], [1.0, 2.0, 0.5])
    assert w[0] == pytest.approx(LOSS_FLOOR * 1.0)  # nothing to win but the floor
    assert w[1] == pytest.approx(1.0) and w[2] == pytest.approx(0.45)
    assert w[2] > w[0]  # by FLOPs it would get a twentieth of a's share
    with pytest.raises(TuneError, match="positive"):
        loss_weights([1.0], [0.0])
    with pytest.raises(TuneError, match="2 FLOP counts for 1 times"):
        loss_weights([1.0, 2.0], [1.0])
    with pytest.raises(TuneError, match="split"):
        TuneOptions(split="time")
