"""The progress summary: the best latency of each task and their sum, never the minimum over all
tasks (a pad or conversion kernel's); the CLI's bar shows it."""

import json
import threading

import pytest
from hypothesis import given, strategies as st

from workbench.engine.tuning.progress import summarize_progress


def _row(task: str, lat: float | None, best: float | None = None) -> dict:
    return {"task": task, "stage": "loop", "latency_ms": lat, "best_ms": best if best is not None else lat}


def test_the_sum_adds_each_tasks_best_not_the_fastest_kernel():
    rows = [_row("pad", 0.002), _row("conv", 0.9), _row("conv", 0.5), _row("conv", 0.7, best=0.5),
            _row("pad", None, best=0.002)]
    s = summarize_progress(rows)
    by = {t.task: t for t in s.tasks}
    assert [t.task for t in s.tasks] == ["pad", "conv"]  # in the order first measured
    assert (by["conv"].best_ms, by["pad"].best_ms) == (0.5, 0.002)
    assert s.sum_ms == pytest.approx(0.5 + 0.002) and s.complete and not s.pending
    assert (s.measurements, s.failed, by["pad"].failed) == (5, 1, 1)
    assert f"{0.502:.4f} ms over 2 tasks" in s.headline()


def test_best_ms_covers_records_of_an_earlier_run():
    """A resumed task's first new line may be slower than what the database already holds."""
    s = summarize_progress([_row("mm", 0.3, best=0.25)])
    assert s.tasks[0].best_ms == 0.25


def test_expected_tasks_without_a_result_are_pending_and_named_in_the_headline():
    rows = [_row("conv", 0.5), _row("relu", None)]  # relu: only a failed candidate so far
    s = summarize_progress(rows, tasks=["pad", "conv", "relu"])
    assert [t.task for t in s.tasks] == ["conv", "relu", "pad"]
    assert s.pending == ("relu", "pad") and not s.complete and s.sum_ms == 0.5
    assert s.headline().endswith("2 of 3 tasks without a result yet")
    assert summarize_progress([], tasks=["pad"]).headline() == "no result yet"
    assert summarize_progress([]).sum_ms is None and not summarize_progress([]).complete


_latency = st.one_of(st.none(), st.floats(1e-4, 10.0, allow_nan=False))


@given(st.lists(st.tuples(st.sampled_from("abcd"), _latency), max_size=30))
def test_the_sum_is_over_tasks_and_bounded_by_their_bests(pairs):
    s = summarize_progress([_row(t, lat) for t, lat in pairs])
    ok = {t for t, lat in pairs if lat is not None}
    assert set(s.pending) == {t for t, _ in pairs} - ok
    for t in s.tasks:
        mine = [lat for task, lat in pairs if task == t.task]
        assert t.measurements == len(mine) and t.failed == mine.count(None)
        assert t.best_ms == (min(x for x in mine if x is not None) if t.task in ok else None)
    if ok:  # at least the slowest task's best, at most every task's best at its worst
        bests = [t.best_ms for t in s.tasks if t.best_ms is not None]
        assert max(bests) <= s.sum_ms <= len(bests) * max(bests) + 1e-12
    else:
        assert s.sum_ms is None


def test_the_cli_bar_shows_the_summary(tmp_path):
    from tqdm import tqdm

    from workbench.cli.tune import _follow

    path = tmp_path / "progress.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [_row("pad", 0.001), _row("conv", 0.4)]))

    class Once(threading.Event):
        """``wait`` says "not stopped" once, so ``_follow`` reads the file one time."""

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def wait(self, timeout=None) -> bool:
            self.calls += 1
            return self.calls > 1

    with open(tmp_path / "bar.txt", "w") as out, tqdm(total=2, disable=False, file=out) as bar:
        _follow(path, bar, Once())
        rows = [json.loads(ln) for ln in path.read_text().splitlines()]
        assert bar.n == 2 and bar.postfix == summarize_progress(rows).headline()
        assert "0.4010 ms over 2 tasks" in bar.postfix and "best 0.0010" not in bar.postfix
