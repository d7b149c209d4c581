"""The conversions benchmark: every conversion checked against its unscheduled kernel, timed
beside a copy of the same bytes; its tables written."""

from __future__ import annotations

import csv

import pytest
from tvm.script import tirx as T

from workbench.bench import conversions as convbench
from workbench.engine.measure.ceilings import stream_copy
from workbench.engine.measure.conversion_rates import buffer_bytes
from workbench.bench.conversions import COLUMNS, ConversionCase, case_conversions, run_conversion_bench

TARGET = {"kind": "llvm", "num-cores": 2}
TINY = (ConversionCase("tiny_blocked", (1, 16, 6, 6), 8, 3, 1, 1, "blocked", {"factor": 8}),
        ConversionCase("tiny_alt", (1, 3, 12, 12), 8, 3, 2, 1, "alt_tiled", {"tiles": [2, 3], "ot": 8, "it": 1}))


def test_each_case_has_its_conversions_there_and_back():
    for case in TINY:
        names = [name for name, _, _ in case_conversions(case, TARGET)]
        assert names == ["convert_data_conv", "convert_conv_out"], case.name
    # the README's cases: a tensor preset on the conv's input view and output, or ALT's template
    assert {c.preset for c in convbench.CASES} == {"blocked", "channels_last", "alt_tiled"}


@pytest.mark.slow
def test_the_benchmark_checks_and_times_every_conversion_against_a_copy(tmp_path, monkeypatch):
    from workbench.bench import conversions as cb

    monkeypatch.setattr(cb, "get_ceilings", lambda target: type("C", (), {"copy_gbs": 10.0})())
    rows = run_conversion_bench(TINY, tmp_path, TARGET, rounds=2, least_bytes=0)
    assert [(r["case"], r["kernel"]) for r in rows] == [
        (c.name, k) for c in TINY for k in ("convert_data_conv", "convert_conv_out")]
    for r in rows:
        assert r["verified"] is True and r["batch"] == 1
        assert r["ms"] > 0 and r["copy_ms"] > 0 and r["pct_adjacent_copy"] > 0
        assert abs(r["pct_copy"] - 100 * r["gbs"] / 10.0) < 1e-9
        assert abs(r["gbs"] - r["mb"] / r["ms"]) < 1e-9  # MB per ms = GB/s
    with (tmp_path / "conversions.csv").open() as f:
        got = list(csv.DictReader(f))
    assert len(got) == len(rows) and tuple(got[0]) == COLUMNS
    md = (tmp_path / "conversions.md").read_text()
    assert "copy ceiling 10.0 GB/s" in md and md.count("| tiny_") == len(rows)


@pytest.mark.slow
def test_each_conversion_is_batched_beyond_the_bytes_asked_for(tmp_path, monkeypatch):
    from workbench.bench import conversions as cb

    assert [cb.scaled_batch(100, least) for least in (0, 100, 101, 400, 401)] == [1, 1, 2, 4, 8]
    monkeypatch.setattr(cb, "get_ceilings", lambda target: type("C", (), {"copy_gbs": 10.0})())
    monkeypatch.setattr(cb, "last_level_cache", lambda: 40_000)
    alt = TINY[1]
    small = {k: buffer_bytes(raw) for k, raw, _ in case_conversions(alt, TARGET)}
    rows = run_conversion_bench((alt,), tmp_path, TARGET, rounds=1)  # at least 1.5 x 40 kB
    for r in rows:
        factor = r["batch"] // alt.shape[0]
        assert factor == cb.scaled_batch(small[r["kernel"]], 60_000) > 1 and r["verified"] is True
        assert abs(r["mb"] * 1e6 - factor * small[r["kernel"]]) < 1 and r["mb"] * 1e6 >= 60_000
    assert "move at least 0.06 MB (last-level cache: 0.03815 MiB)" in (tmp_path / "conversions.md").read_text()


def test_a_conversion_that_differs_from_its_unscheduled_kernel_is_not_verified():
    n = 256

    @T.prim_func
    def doubled(a: T.Buffer((n // 16, 16), "float32"), b: T.Buffer((n // 16, 16), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i, v in T.grid(n // 16, 16):
            b[i, v] = a[i, v] * T.float32(2)

    row = convbench._measure("bad", "k", stream_copy(n), doubled, TARGET, 10.0, rounds=1)
    assert row["verified"] is False
    assert convbench._measure("good", "k", stream_copy(n), stream_copy(n), TARGET, 10.0, rounds=1)["verified"] is True
