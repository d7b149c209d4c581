"""The library contenders: each timer, the sidecar they are timed in, and a contender that fails
named missing with its reason instead of stopping the run."""

from __future__ import annotations

import pytest

from workbench.engine.measure import library
from workbench.bench.suite import Workload

GMM = Workload("gmm_tiny", "matmul", (16, 32), (32, 8), {})
CONV = Workload("c2d_tiny", "conv2d", (1, 4, 8, 8), (4, 4, 3, 3), {"padding": 1})


class _FakeSidecar:
    """Makes timers in this process; the maker named in ``fails`` raises as the sidecar reports it."""

    def __init__(self, fails: str) -> None:
        self.fails, self.made = fails, []

    def timer(self, make, *args):
        self.made.append((make.__name__, args[1:]))
        if make.__name__ == self.fails:
            raise RuntimeError("the timing sidecar failed: BackendCompilerFailed: no C++ compiler\ntraceback ...")
        return (lambda: 1.0) if make is not library.numpy_timer or args[0].op == "matmul" else None


def test_a_contender_that_cannot_be_made_is_missing_with_its_reason_and_numpy_times_gmm_only():
    side = _FakeSidecar(fails="compile_timer")
    timers, missing = library.library_timers(side, GMM, 2)
    assert set(timers) == {"torch", "numpy"} and missing == {"torch_compile": "BackendCompilerFailed: no C++ compiler"}
    assert side.made == [("torch_timer", (2,)), ("numpy_timer", ()), ("compile_timer", (2,))]  # threads where taken
    timers, missing = library.library_timers(_FakeSidecar(fails=""), CONV, 2)
    assert set(timers) == {"torch", "torch_compile"} and missing == {}  # no NumPy conv: not applicable, not missing


def test_the_fastest_library_is_named_by_its_timers_label():
    assert library.fastest({"torch": 2.0, "numpy": 1.0, "torch_compile": None}, {}) == (1.0, "NumPy")
    assert library.fastest({"torch": 0.5, "numpy": 1.0}, {"torch": "PyTorch (channels-last)"}) == (
        0.5, "PyTorch (channels-last)")
    assert library.fastest({"joint": 0.1, "torch": None}, {}) == (None, "")  # only libraries count


@pytest.mark.slow
def test_the_sidecar_makes_and_samples_labelled_timers_and_reports_a_failure():
    with library.Sidecar() as side:
        timers, missing = library.library_timers(side, GMM, 1, ("torch", "numpy"))
        assert {k: t.label for k, t in timers.items()} == {"torch": "PyTorch", "numpy": "NumPy"}
        assert all(t() > 0 for t in timers.values())
        bad = Workload("c2d_bad", "conv2d", (1, 3, 8, 8), (4, 5, 3, 3), {})  # 3 input channels, weight for 5
        timers, missing = library.library_timers(side, bad, 1, ("torch",))
        assert timers == {} and missing["torch"].startswith("RuntimeError") and "sidecar" not in missing["torch"]
        (conv,) = library.library_timers(side, CONV, 1, ("torch",))[0].values()
        assert conv.label in ("PyTorch (NCHW)", "PyTorch (channels-last)")  # the faster format, named


@pytest.mark.slow
def test_torch_compile_is_timed_on_the_op_and_checked_against_eager_pytorch():
    pytest.importorskip("torch")
    timer = library.compile_timer(GMM, 1)
    assert timer.label == "torch.compile" and timer() > 0
