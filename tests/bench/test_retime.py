"""``bench --retime``: a finished suite run's kernels rebuilt from its databases and timed again."""

from __future__ import annotations

import csv
import shutil

import pytest

from workbench.bench import suite as bench
from workbench.engine.base.errors import WorkbenchError
from workbench.bench.retime import retime
from workbench.engine.build.targets import DEFAULT_TARGET

W = bench.Workload("gmm_tiny", "matmul", (64, 64), (64, 64), {})
LIBS = ("torch", "numpy")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    (row,) = bench.run_bench([W], 8, out, dict(DEFAULT_TARGET), rounds=3, libraries=LIBS)
    return out, row


@pytest.mark.tuning
def test_a_retimed_run_keeps_its_kernels_and_tuning_columns_and_times_every_contender_again(run, tmp_path):
    run_dir, first = run
    steps: list[str] = []
    (row,) = retime(run_dir, [W, bench.Workload("absent", "matmul", (8, 8), (8, 8), {})], tmp_path,
                    dict(DEFAULT_TARGET), rounds=3, libraries=LIBS, on_step=steps.append)
    assert row.verified and row.workload == "gmm_tiny" and "rebuilt from" in steps[1]
    assert row.joint_layout == first.joint_layout
    for name in ("joint_s_per_measurement", "loop_only_tuning_ms", "metaschedule_tuning_ms", "joint_tuning_ms"):
        assert getattr(row, name) == pytest.approx(getattr(first, name), rel=1e-3)
    for name in ("metaschedule", "loop_only", "joint", "expert", "torch", "numpy"):
        assert getattr(row, f"{name}_ms") > 0
    assert row.peak_gflops > 0 and (tmp_path / "machine.json").is_file()
    with (tmp_path / "results.csv").open() as f:
        (saved,) = list(csv.DictReader(f))
    assert float(saved["joint_vs_metaschedule"]) == pytest.approx(row.metaschedule_ms / row.joint_ms, rel=1e-3)
    # the same kernels: their timings agree with the first run's within the spread a busy machine allows
    assert 0.2 < row.joint_ms / first.joint_ms < 5


@pytest.mark.tuning
def test_a_joint_layout_outside_the_ops_space_is_refused_by_name(run, tmp_path):
    run_dir, _ = run
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    text = (copy / "results.csv").read_text().splitlines()
    header, row = text[0].split(","), text[1].split(",")
    row[header.index("joint_layout")] = "nkn(m=3; n=5)"
    (copy / "results.csv").write_text("\n".join([text[0], ",".join(row)]) + "\n")
    with pytest.raises(WorkbenchError, match=r"joint layout 'nkn\(m=3; n=5\)' is not in this op's layout space"):
        retime(copy, [W], tmp_path / "out", dict(DEFAULT_TARGET), rounds=3, libraries=LIBS)


def test_a_folder_that_is_no_finished_run_is_refused(tmp_path):
    with pytest.raises(WorkbenchError, match="is not a finished suite run"):
        retime(tmp_path, [W], tmp_path / "out", dict(DEFAULT_TARGET))
