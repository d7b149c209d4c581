"""The benchmark's re-measurement: interleaving, medians, spreads, the second set of a noisy
contender and its flag (on scripted timers), then one tiny workload end to end."""

from __future__ import annotations

import csv

import pytest

from workbench.engine import bench
from workbench.engine.errors import TuneError
from workbench.engine.interleave import interleaved_samples, remeasure, steal_pct
from workbench.engine.targets import DEFAULT_TARGET


def scripted(values: dict[str, list[float]], log: list[str]) -> dict:
    """Timers that return their scripted samples in turn and log who was called."""
    its = {name: iter(v) for name, v in values.items()}

    def timer(name):
        def sample():
            log.append(name)
            return next(its[name])
        return sample

    return {name: timer(name) for name in values}


def test_contenders_are_measured_in_turn():
    log: list[str] = []
    got = interleaved_samples(scripted({n: [1.0] * 3 for n in "ABCD"}, log), rounds=3)
    assert "".join(log) == "ABCD" * 3
    assert got == {n: [1.0] * 3 for n in "ABCD"}
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        interleaved_samples({}, rounds=0)


def test_every_sample_waits_for_the_previous_contenders_threads_to_settle(monkeypatch):
    """A wait for quiet before each sample: the previous contender's thread pools spin on after
    it returns and would take the next one's cores."""
    from workbench.engine import interleave

    log: list[str] = []
    monkeypatch.setattr(interleave, "wait_for_quiet", lambda s: log.append(f"quiet {s}"))
    interleaved_samples(scripted({"A": [1.0] * 2, "B": [1.0] * 2}, log), rounds=2, settle_s=0.3)
    assert log == ["quiet 0.3", "A", "quiet 0.3", "B"] * 2


def _fake_machine(monkeypatch, busy_windows: int):
    """A clock and CPU counters: the two cores run (a spinning pool) for ``busy_windows``
    windows, then idle."""
    from workbench.engine import interleave

    clock = {"t": 0.0, "windows": 0}

    def sleep(s):
        clock["t"] += s
        clock["windows"] += 1

    def cpu_times():  # 0.1 s per window of two cores: all busy, or all idle
        busy = min(clock["windows"], busy_windows)
        return _Times(busy * 0.1, (clock["windows"] - busy) * 0.1)

    monkeypatch.setattr(interleave.time, "sleep", sleep)
    monkeypatch.setattr(interleave.time, "perf_counter", lambda: clock["t"])
    monkeypatch.setattr(interleave.psutil, "cpu_times", cpu_times)
    return clock


class _Times(tuple):
    """``psutil.cpu_times()``'s shape: a tuple of seconds with named fields."""

    def __new__(cls, user, idle):
        return super().__new__(cls, (user, idle, 0.0))

    user = property(lambda self: self[0])
    idle = property(lambda self: self[1])
    iowait = property(lambda self: self[2])


def test_the_wait_for_quiet_ends_when_the_cores_idle_or_at_its_limit(monkeypatch):
    from workbench.engine.interleave import WINDOW_S, wait_for_quiet

    clock = _fake_machine(monkeypatch, busy_windows=5)
    waited = wait_for_quiet(2.0)
    assert clock["windows"] == 6 and waited == pytest.approx(6 * WINDOW_S)  # 5 busy windows, then one idle
    clock = _fake_machine(monkeypatch, busy_windows=10 ** 6)
    assert wait_for_quiet(1.0) == pytest.approx(1.0, abs=WINDOW_S)  # always busy: measured anyway
    assert wait_for_quiet(0.0) == 0.0


def test_medians_and_spreads_of_quiet_contenders():
    log: list[str] = []
    got = remeasure(scripted({"A": [1.0, 1.02, 0.98, 1.0, 1.01], "B": [2.0, 2.1, 2.0, 1.95, 2.0]}, log), rounds=5)
    assert "".join(log) == "AB" * 5  # nobody measured again
    assert got["A"].median_ms == 1.0 and got["A"].relative_spread == pytest.approx(0.04)
    assert got["B"].median_ms == 2.0 and got["B"].relative_spread == pytest.approx(0.075)
    assert not got["A"].noisy and not got["B"].noisy and got["A"].stats.rounds == 1


def test_a_noisy_contender_is_measured_again_then_flagged_if_still_noisy():
    log: list[str] = []
    script = {"A": [1.0] * 3,
              "B": [2.0, 3.0, 2.0] + [2.0, 2.02, 2.0],  # noisy, then quiet: the quiet set is reported
              "C": [3.0] * 3,
              "D": [1.0, 2.0, 1.0] + [1.0, 1.5, 1.2]}   # noisy twice: the quieter set, flagged
    got = remeasure(scripted(script, log), rounds=3, noise=0.10)
    assert "".join(log) == "ABCD" * 3 + "BD" * 3
    assert (got["B"].median_ms, got["B"].noisy, got["B"].stats.rounds) == (2.0, False, 2)
    assert got["B"].relative_spread == pytest.approx(0.01)
    assert (got["D"].median_ms, got["D"].noisy, got["D"].stats.rounds) == (1.2, True, 2)
    assert got["D"].relative_spread == pytest.approx(0.5 / 1.2)
    assert not got["A"].noisy and got["C"].median_ms == 3.0 and got["C"].stats.rounds == 1


def test_a_row_reports_remeasured_figures_beside_the_tuning_ones():
    log: list[str] = []
    got = remeasure(scripted({"metaschedule": [2.0] * 2, "loop_only": [1.5] * 2, "joint": [1.0] * 2,
                              "joint_conversions": [0.25] * 2, "torch": [0.5, 1.0] * 2}, log), rounds=2)
    row = bench.BenchRow("w", "conv2d", 8, joint_layout="alt_tiled()", verified=True,
                         date="d", machine="m", metaschedule_tuning_ms=1.5, joint_tuning_ms=0.9,
                         flops=3_000_000, peak_gflops=4.0, **bench._remeasured_fields(got, 2))
    d = row.as_dict()
    assert list(d) == bench.COLUMNS
    assert (d["metaschedule_ms"], d["joint_ms"], d["numpy_ms"], d["numpy_spread"]) == (2.0, 1.0, None, None)
    assert d["joint_vs_metaschedule"] == 2.0 and d["joint_vs_torch"] == pytest.approx(0.75)
    assert (d["metaschedule_tuning_ms"], d["joint_tuning_ms"], d["noisy"]) == (1.5, 0.9, "torch")
    assert d["joint_conversions_ms"] == 0.25 and d["joint_with_conversions_vs_metaschedule"] == 1.6
    assert d["joint_vs_loop_only"] == 1.5 and d["joint_with_conversions_vs_loop_only"] == 1.2
    # 3 MFLOP in 1.5 ms: 2 GFLOP/s of a 4 GFLOP/s peak; the joint kernel's 3 GFLOP/s
    assert (d["loop_only_pct_peak"], d["pct_peak"]) == (pytest.approx(50.0), pytest.approx(75.0))


def test_a_tiny_bench_remeasures_every_contender(tmp_path):
    w = bench.Workload("gmm_tiny", "matmul", (64, 64), (64, 64), {})
    steps: list[str] = []
    (row,) = bench.run_bench([w], 8, tmp_path, dict(DEFAULT_TARGET), rounds=3, on_step=steps.append)
    assert row.verified and "interleaved, 3 rounds" in steps[-1]
    for name in bench.CONTENDERS:
        if name != "joint_conversions":
            assert getattr(row, f"{name}_ms") > 0 and getattr(row, f"{name}_spread") >= 0
    # the joint layout's conversions are a contender of their own, none for the default layout
    assert (row.joint_conversions_ms > 0) == (row.joint_layout != "default")
    assert (row.joint_conversions_gbs is None) == (row.joint_layout == "default")
    assert row.metaschedule_tuning_ms > 0 and row.joint_tuning_ms > 0 and row.rounds == 3
    with (tmp_path / "results.csv").open() as f:
        (saved,) = list(csv.DictReader(f))
    assert float(saved["joint_vs_torch"]) == pytest.approx(row.torch_ms / row.joint_ms, rel=1e-3)
    assert float(saved["joint_vs_metaschedule"]) == pytest.approx(row.metaschedule_ms / row.joint_ms, rel=1e-3)
    assert float(saved["expert_vs_torch"]) == pytest.approx(row.torch_ms / row.expert_ms, rel=1e-3)
    assert float(saved["joint_vs_loop_only"]) == pytest.approx(row.loop_only_ms / row.joint_ms, rel=1e-3)
    assert row.loop_only_tuning_ms > 0 and (tmp_path / "progress" / "gmm_tiny_loop-only.jsonl").exists()
    assert (tmp_path / "progress" / "gmm_tiny_metaschedule.jsonl").exists()
    pct = 100 * 2 * 64 ** 3 / (row.joint_ms * 1e6) / row.peak_gflops
    assert 0 < row.joint_s_per_measurement < 60 and row.flops == 2 * 64 ** 3 and float(saved["pct_peak"]) == pytest.approx(pct, rel=1e-3)
    assert "joint ms (tuning)" in (tmp_path / "results.md").read_text()


def test_metaschedule_with_tvms_defaults_starts_from_no_expert_schedule(tmp_path, monkeypatch):
    """The plain-TVM yardstick must not get the workbench's seed; the loop-only stage must."""
    from workbench.engine.tuning import loop

    seeded: list[str] = []
    real = loop.measure_seed
    monkeypatch.setattr(loop, "measure_seed", lambda task, *a: seeded.append(task.name) or real(task, *a))
    searches: list[tuple] = []  # (population, generations, batch, warm-up) of each MetaSchedule run
    real_search = loop._tune_one

    def search(task, tgt, work_dir, trials, per_iter, rand, machinery, callback, population, generations=3):
        searches.append((population, generations, per_iter, machinery[3].num_warmup_samples))
        return real_search(task, tgt, work_dir, trials, per_iter, rand, machinery, callback, population, generations)

    monkeypatch.setattr(loop, "_tune_one", search)
    w = bench.Workload("gmm_tiny", "matmul", (32, 32), (32, 32), {})
    graph, op = bench.workload_graph(w)
    values, timers = graph.random_inputs(), {}
    for tuner, options in (("metaschedule", bench.TVM_DEFAULTS), ("loop_only", {})):
        ok, tuning_ms = bench._loop_only(w, graph, op, 4, tmp_path, dict(DEFAULT_TARGET), 0, tuner, values, timers,
                                         **options)
        assert ok and tuning_ms > 0 and timers[tuner]() > 0
    assert seeded == [op]  # once: the seeded tuner's
    defaults = bench.TVM_DEFAULTS
    assert searches[0] == (defaults["population_size"], defaults["genetic_num_iters"], 4,  # (the budget: 4)
                           defaults["warmup_samples"]) == (512, 4, 4, 100)
    assert searches[1] == (128, 3, 3, 8)  # the workbench's own search (its seed took one of the 4)


def test_a_run_folder_from_before_the_columns_were_renamed_is_refused(tmp_path):
    """Its 'metaschedule' database holds the seeded run: resumed as the unseeded one, it would mix them."""
    (tmp_path / "progress").mkdir()
    (tmp_path / "progress" / "gmm_tiny_tvm-metaschedule.jsonl").write_text("")
    w = bench.Workload("gmm_tiny", "matmul", (64, 64), (64, 64), {})
    with pytest.raises(TuneError, match="before the columns were renamed"):
        bench.run_bench([w], 8, tmp_path, dict(DEFAULT_TARGET), rounds=3)
    assert not (tmp_path / "results.csv").exists()


def test_budget_zero_measures_the_expert_schedules_alone(tmp_path):
    """No tuner runs: the expert schedule against PyTorch and NumPy, interleaved as ever."""
    w = bench.Workload("gmm_tiny", "matmul", (64, 64), (64, 64), {})
    (row,) = bench.run_bench([w], 0, tmp_path, dict(DEFAULT_TARGET), rounds=3)
    assert row.verified and row.expert_ms > 0 and row.torch_ms > 0 and row.numpy_ms > 0
    assert row.metaschedule_ms is None and row.loop_only_ms is None and row.joint_ms is None
    assert row.joint_layout == ""
    assert not (tmp_path / "progress" / "gmm_tiny_joint.jsonl").exists()
    assert row.expert_vs_torch == pytest.approx(row.torch_ms / row.expert_ms)
    assert "expert schedule alone vs PyTorch: " in (tmp_path / "results.md").read_text()
    assert row.steal_pct is None or 0 <= row.steal_pct <= 100  # None: an OS that does not count it
    assert "steal %" in (tmp_path / "results.md").read_text()


def test_steal_is_the_hypervisors_share_of_the_cpu_time_between_two_readings():
    from collections import namedtuple

    Times = namedtuple("Times", "user system idle steal")
    assert steal_pct(Times(10, 5, 80, 5), Times(40, 10, 130, 20)) == pytest.approx(100 * 15 / 100)
    assert steal_pct(Times(1, 1, 1, 1), Times(1, 1, 1, 1)) is None  # no time passed
    assert steal_pct(Times(1, 1, 1, 1), namedtuple("T", "user system idle")(2, 2, 2)) is None  # not counted


def test_the_network_benchmark_runs_every_contender_and_checks_ours_against_pytorch(tmp_path):
    """A small BERT layer (sequence 4, hidden 64, 2 heads) with tiny budgets: each contender
    timed, each output compared with PyTorch's, the issue's columns written."""
    import csv

    from workbench.engine.netbench import NETWORK_COLUMNS, run_network_bench

    # TVM's MetaSchedule pipeline is left out here (minutes even at 16 trials); the benchmark runs it
    rows = run_network_bench(("bert_layer",), 12, tmp_path, {"kind": "llvm", "num-cores": 2},
                             options={"bert_layer": {"seq": 4, "hidden": 64, "heads": 2}}, rounds=2,
                             contenders=("ours", "torch", "tvm_untuned", "onnxruntime"))
    (row,) = rows
    assert not [k for k in row if k.endswith("_error")], row
    assert all(row[f"{k}_ms"] > 0 for k in ("ours", "torch", "tvm_untuned", "onnxruntime"))
    assert row["tvm_metaschedule_ms"] is None and row["ours_vs_tvm_metaschedule"] is None
    scale = max(1.0, row["reference_max_abs"])
    assert row["max_abs_err"] < 1e-4 * scale and row["tvm_untuned_err"] < 1e-3 * scale
    assert row["ours_vs_torch"] == pytest.approx(row["torch_ms"] / row["ours_ms"])
    with (tmp_path / "networks.csv").open() as f:
        assert next(csv.reader(f))[:len(NETWORK_COLUMNS)] == list(NETWORK_COLUMNS)
    assert "ours vs TVM Relax + MetaSchedule" in (tmp_path / "networks.md").read_text()
    with (tmp_path / "bert_layer_kernels.csv").open() as f:  # where ours spends its time, slowest first
        kernels = list(csv.DictReader(f))
    ms = [float(k["ms"]) for k in kernels]
    assert ms == sorted(ms, reverse=True) and min(ms) > 0
    assert sum(float(k["share"]) for k in kernels) == pytest.approx(1.0, abs=0.01)
    assert any("matmul" in k["ops"] or "dense" in k["ops"] for k in kernels)


def test_the_conversions_a_layout_brings_are_built_and_timed_with_their_analytic_schedules():
    """The "conversions ms" column times what a session builds: each conversion kernel after
    ``conversion_steps``, not the unscheduled loop nest."""
    import tvm_ffi

    from workbench.engine.book import LayoutBook
    from workbench.engine.expert.convert import scheduled_conversions
    from workbench.engine.keys import apply_actions
    from workbench.engine.presets import preset_actions
    from workbench.engine.program import make_program

    w = bench.Workload("c2d_tiny", "conv2d", (1, 16, 10, 10), (16, 16, 3, 3), {"padding": 1})
    graph, op = bench.workload_graph(w)
    target = dict(DEFAULT_TARGET)
    book = apply_actions(graph, LayoutBook(), preset_actions(graph, "alt_tiled", op))
    built, ok = bench._tuned(graph, book, op, None, target)
    names = [k.name for k in built.program.plan.kernels if k.conversion is not None]
    assert ok and len(names) >= 2  # into the tiled layout and back (and the weights)
    want = scheduled_conversions(make_program(graph, book), target)
    assert set(want) == set(names)
    for name, func in want.items():
        assert tvm_ffi.structural_equal(built.program.funcs[name], func)
        assert "T.parallel" in func.script()  # scheduled: the unscheduled nest has no parallel loop
    # the column's timer: every conversion kernel, added up
    timer = bench.conversions_timer(built, graph.random_inputs(), min_ms=5.0)
    each = [bench.kernel_timer(built, name, graph.random_inputs(), min_ms=5.0)() for name in names]
    assert timer() == pytest.approx(sum(each), rel=0.5) and bench.conversions_timer(
        bench._tuned(graph, LayoutBook(), op, None, target)[0], graph.random_inputs()) is None


def test_the_search_study_table_has_each_run_and_the_geometric_mean(tmp_path):
    rows = [{"workload": "a", "seed": 0, "budget": 40, "model_ms": 1.0, "random_ms": 2.0, "model_vs_random": 2.0,
             "model_layout": "alt_tiled(tiles=[4, 16])"},
            {"workload": "b", "seed": 1, "budget": 40, "model_ms": 2.0, "random_ms": 1.0, "model_vs_random": 0.5,
             "model_layout": "default"}]
    text = bench.write_study(rows, tmp_path).read_text()
    assert "| a | 0 | 40 | 1 | 2 | 2 | alt_tiled(tiles=[4, 16]) |" in text and "| b | 1 | 40 | 2 | 1 | 0.5 | default |" in text
    assert "random / guided: 1x over 2 runs" in text
