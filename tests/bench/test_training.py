"""The training suite (``bench.training``): a run on the LLTM writes its tables, checks every
contender's losses against PyTorch eager before timing, and reports the speedups of its times."""

from __future__ import annotations

import json

import pytest

from workbench.bench.training import COLUMNS, TOLERANCE, run_training_bench
from workbench.engine.build.targets import DEFAULT_TARGET


@pytest.mark.slow
def test_a_run_checks_then_times_every_contender(tmp_path):
    steps = []
    (row,) = run_training_bench(["lltm"], tmp_path, dict(DEFAULT_TARGET), rounds=1, on_step=steps.append)
    assert steps == ["lltm: build and check", "lltm: time"]
    assert row["verified"] and row["max_loss_error"] <= TOLERANCE
    for c in ("ours", "torch", "torch_compile"):
        assert row[f"{c}_ms"] > 0
    assert row["speedup_vs_torch"] == pytest.approx(row["torch_ms"] / row["ours_ms"])
    assert row["speedup_vs_torch_compile"] == pytest.approx(row["torch_compile_ms"] / row["ours_ms"])
    assert json.loads((tmp_path / "training.json").read_text())[0]["model"] == "lltm"
    header = (tmp_path / "training.csv").read_text().splitlines()[0]
    assert header.split(",") == list(COLUMNS) and "| lltm |" in (tmp_path / "training.md").read_text()
