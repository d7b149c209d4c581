"""The ceilings: the theoretical peak, the library yardstick and the report's warning, a peak
measured again below a library, the cache file (old files still read, stale ones measured again)."""

from __future__ import annotations

import json

import pytest

from workbench.engine.measure import ceilings as ceil_mod
from workbench.engine.measure.ceilings import Ceilings, Yardstick, format_ceilings
from workbench.engine.build.targets import DEFAULT_TARGET

KIB = 1024
BASE = dict(cpu="test cpu", target={"kind": "llvm"}, peak_gflops=100.0, copy_gbs=10.0, triad_gbs=12.0,
            caches={"L1d": 32 * KIB}, line_bytes=64)


def test_theoretical_peak_is_the_product_of_its_sourced_factors():
    c = Ceilings(**BASE, isa="AVX2", lanes=8, accumulators=10, fma_ports=2, cores=2, clock_ghz=2.5,
                 clock_source="/proc/cpuinfo 'cpu MHz'")
    assert c.theoretical_gflops == pytest.approx(8 * 2 * 2 * 2 * 2.5)
    text = format_ceilings(c)
    assert "peak (theoretical)" in text and "160.0 GFLOP/s" in text and "/proc/cpuinfo" in text
    assert "FMA ports (assumed" in text and "10 accumulators x 8 lanes" in text
    assert Ceilings(**BASE).theoretical_gflops is None


def test_a_library_above_the_measured_peak_is_a_warning():
    torch_fast = Ceilings(**BASE, library=(Yardstick("NumPy", 2048, 90.0, 2), Yardstick("PyTorch", 2048, 169.0, 2)))
    text = format_ceilings(torch_fast)
    assert "PyTorch GEMM 2048 (library)" in text and "169.0 GFLOP/s" in text
    (warning,) = [ln for ln in text.splitlines() if ln.startswith("WARNING")]
    assert "PyTorch GEMM 2048" in warning and "100.0" in warning
    slow = Ceilings(**BASE, library=(Yardstick("NumPy", 2048, 90.0, 2),))
    assert "WARNING" not in format_ceilings(slow)


def test_a_peak_below_a_library_is_measured_again_and_the_best_kept():
    library = (Yardstick("NumPy", 2048, 380.0, 2), Yardstick("PyTorch", 2048, 400.0, 2))
    rates = iter([243.0, 480.0, 470.0])
    calls = []

    def measure() -> float:
        calls.append(1)
        return next(rates)

    assert ceil_mod._peak_beside(library, 240.0, measure, pause_s=0) == 480.0 and len(calls) == 2  # stops above 400
    calls.clear()
    assert ceil_mod._peak_beside(library, 450.0, measure, pause_s=0) == 450.0 and not calls  # above: kept as is
    slow = iter([250.0] * 9)
    assert ceil_mod._peak_beside(library, 240.0, lambda: next(slow), tries=3, pause_s=0) == 250.0  # gives up after 3


def test_ceilings_with_a_yardstick_round_trip_and_old_files_still_read():
    c = Ceilings(**BASE, isa="AVX2", lanes=8, library=(Yardstick("PyTorch", 1024, 150.0, 2),))
    assert Ceilings.from_json(json.loads(json.dumps(c.to_json()))) == c
    old = {k: v for k, v in Ceilings(**BASE).to_json().items()
           if k in ("cpu", "target", "peak_gflops", "copy_gbs", "triad_gbs", "caches", "line_bytes", "measured_at",
                    "note")}
    read = Ceilings.from_json(old)
    assert read.library == () and read.theoretical_gflops is None and read.peak_gflops == 100.0


def test_library_gemm_measures_numpy_and_torch_and_restores_torch_threads():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    got = ceil_mod.library_gemm(cores=1, n=128, runs=2)
    assert [y.library for y in got] == ["NumPy", "PyTorch"] and all(y.gflops > 0 and y.n == 128 for y in got)
    assert got[1].threads == 1 and torch.get_num_threads() == before
    assert got[0].intensity == pytest.approx(2 * 128 ** 3 / (3 * 128 * 128 * 4))


def test_copy_bandwidth_reads_the_cached_ceilings_else_measures_the_copy_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("ALT_WORKBENCH_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr(ceil_mod, "stream_gbs", lambda target, elems: calls.append(elems) or (7.0, 8.0))
    monkeypatch.setattr(ceil_mod, "library_gemm", lambda *a: pytest.fail("no library pool for the copy alone"))
    assert ceil_mod.copy_bandwidth(DEFAULT_TARGET) == 7.0 and len(calls) == 1
    path = ceil_mod._cache_file(DEFAULT_TARGET)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(Ceilings(**BASE).to_json()))
    assert ceil_mod.copy_bandwidth(DEFAULT_TARGET) == 10.0 and len(calls) == 1  # cached: nothing measured


def _state(**kw):
    from workbench.engine.measure.machine import MachineState

    return MachineState(**{**dict(taken_at=1000.0, vcpus=2, threads_per_core=1, clock_mhz=2600.0, load1=0.3,
                                  steal_s=0.0, cpu_s=10.0), **kw})


def test_cached_ceilings_older_than_the_process_or_from_another_machine_state_are_stale():
    then = _state()
    c = Ceilings(**BASE, measured_at=1000.0, pid=42, machine=then.to_json())
    assert ceil_mod.stale_reason(c, then, started=900.0) == ""
    assert "before this process started" in ceil_mod.stale_reason(c, then, started=1001.0)
    assert "by process 42" in ceil_mod.stale_reason(c, then, started=1001.0)
    assert "4 vCPUs" in ceil_mod.stale_reason(c, _state(vcpus=4), started=900.0)
    assert "2600 MHz then, 4500 MHz now" in ceil_mod.stale_reason(c, _state(clock_mhz=4500.0), started=900.0)
    assert ceil_mod.stale_reason(c, _state(clock_mhz=2700.0), started=900.0) == ""  # within 10%
    assert "the load was 0.3 then, 1.9 now" in ceil_mod.stale_reason(c, _state(load1=1.9), started=900.0)
    assert ceil_mod.stale_reason(c, _state(load1=1.2), started=900.0) == ""  # under one core's worth
    old = Ceilings(**BASE, measured_at=1000.0)  # a cache file from before the state was recorded
    assert "does not say" in ceil_mod.stale_reason(old, then, started=900.0)


def test_get_ceilings_measures_again_when_the_cache_is_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("ALT_WORKBENCH_CACHE", str(tmp_path))
    now = {"state": _state(taken_at=2000.0)}
    measured = []

    def measure(target):
        measured.append(now["state"])
        return Ceilings(**{**BASE, "peak_gflops": 100.0 + len(measured)}, measured_at=now["state"].taken_at,
                        pid=7, machine=now["state"].to_json())

    monkeypatch.setattr(ceil_mod, "measure_ceilings", measure)
    monkeypatch.setattr(ceil_mod, "machine_state", lambda: now["state"])
    monkeypatch.setattr(ceil_mod, "_process_start", lambda: 1500.0)
    path = ceil_mod._cache_file(DEFAULT_TARGET)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(Ceilings(**BASE, measured_at=1000.0, machine=_state().to_json()).to_json()))
    assert ceil_mod.get_ceilings(DEFAULT_TARGET).peak_gflops == 101.0  # written before this process: measured
    assert ceil_mod.get_ceilings(DEFAULT_TARGET).peak_gflops == 101.0 and len(measured) == 1  # fresh: the cache
    now["state"] = _state(taken_at=2100.0, clock_mhz=4500.0)
    assert ceil_mod.get_ceilings(DEFAULT_TARGET).peak_gflops == 102.0  # another clock: measured again
    saved = Ceilings.from_json(json.loads(path.read_text()))
    assert saved.pid == 7 and saved.machine["clock_mhz"] == 4500.0 and saved.measured_at == 2100.0


def test_the_report_says_when_and_how_the_ceilings_were_measured():
    c = Ceilings(**BASE, measured_at=0.0, pid=42, how="FMA kernel (10 accumulators x 8 lanes): best of 5")
    (line,) = [ln for ln in format_ceilings(c).splitlines() if ln.startswith("measured")]
    assert "by process 42: FMA kernel (10 accumulators x 8 lanes): best of 5" in line


def test_a_kernel_above_the_measured_peak_shows_why_not_a_plain_percentage():
    """Over 100% of the FMA peak says the peak was measured low: the table and the roofline's
    hover give the reason with the figure, never the bare share."""
    from workbench.engine.measure.roofline import RooflinePoint
    from workbench.viz.roofline import roofline_figure

    c = Ceilings(**BASE)  # 100 GFLOP/s
    fast = RooflinePoint("gmm", "v1", flops=2 * 10**9, bytes=10**6, latency_ms=10.0)  # 200 GFLOP/s, compute-bound
    assert fast.over_peak(c) and fast.percent_of_roof(c) == pytest.approx(200.0)
    row = fast.row(c)
    assert row["% of roof"] is None and row["note"].startswith("above the measured FMA peak (200% of it)")
    (trace,) = [t for t in roofline_figure([fast], c).data if t.name == "gmm · v1"]
    assert "% of the compute roof" not in trace.hovertemplate and "200% of it" in trace.hovertemplate
    slow = RooflinePoint("gmm", "v2", flops=2 * 10**9, bytes=10**6, latency_ms=40.0)  # 50 GFLOP/s
    assert not slow.over_peak(c) and slow.row(c)["% of roof"] == pytest.approx(50.0)
