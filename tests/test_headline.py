"""benchmarks/results/headline.json: the runs the README's results tables quote. Each names an
existing folder whose CSVs hold a value in every column the README quotes, and
benchmarks/README.md lists every run."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
HEADLINE = json.loads((RESULTS / "headline.json").read_text())
BENCHMARKS = ("suite", "networks", "conversions", "training")


def _is_nan(text: str) -> bool:
    try:
        return math.isnan(float(text))
    except ValueError:
        return False


def test_each_benchmark_has_a_headline_run_on_a_named_machine():
    assert set(BENCHMARKS) <= set(HEADLINE)
    for name in BENCHMARKS:
        entry = HEADLINE[name]
        assert (RESULTS / entry["folder"]).is_dir(), f"{name}: no folder {entry['folder']}"
        assert entry["machine"] and entry["date"] and entry["commit"] and entry["tables"]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_quoted_column_is_in_its_csv_with_a_value(name):
    entry = HEADLINE[name]
    for table in entry["tables"]:
        path = RESULTS / entry["folder"] / table["csv"]
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = reader.fieldnames or []
        assert rows, f"{path}: no rows"
        for column in table["columns"]:
            assert column in header, f"{path} has no column {column!r}"
            values = [r[column] for r in rows]
            assert any(v.strip() for v in values) or column == "noisy", f"{path}: {column!r} is empty in every row"
            assert not any(_is_nan(v) for v in values), f"{path}: {column!r} holds nan"


def test_the_index_of_runs_lists_every_results_folder():
    index = (RESULTS.parent / "README.md").read_text()
    folders = sorted(p.name for p in RESULTS.iterdir() if p.is_dir())
    missing = [f for f in folders if f"`{f}`" not in index]
    assert not missing, f"benchmarks/README.md does not list {missing}"
    for name in BENCHMARKS:
        assert f"`{HEADLINE[name]['folder']}`" in index
