"""Tasks and results: names are checked, results round-trip through JSON."""

import pytest

from workbench.engine.base.errors import TuneError
from workbench.engine.tuning.records import TuneResult, TuneTask


def test_a_task_needs_an_identifier_and_a_primfunc(mm_task):
    with pytest.raises(TuneError, match="identifier"):
        TuneTask("not a name", mm_task.func, 1)
    with pytest.raises(TuneError, match="must be a PrimFunc"):
        TuneTask("mm", "C = A @ B", 1)


def test_a_result_round_trips_through_json():
    res = TuneResult("mm", 0.5, [[], []], 8, failed=1, flops=2 * 64 ** 3)
    assert TuneResult.from_json(res.to_json()) == res
    assert res.gflops == pytest.approx(2 * 64 ** 3 / 0.5 / 1e6)
