"""``bench --suite networks`` on the command line: what it prints and its exit status, the
benchmark itself stubbed (it is tested in tests/bench/test_suite.py)."""

from __future__ import annotations

from workbench import cli
from workbench.bench import networks as netbench


def _stub(rows, seen=None):
    def run(names, budget, out, target, *, on_step=None, contenders=(), cold=False):
        if seen is not None:
            seen["cold"] = cold
        netbench.write_network_results(rows, out)
        return rows

    return run


def test_a_contender_that_failed_is_printed_once_and_fails_the_run(tmp_path, capsys, monkeypatch):
    row = {"network": "bert_layer", "budget": 8, "ours_error": "TuneError: a joint budget of 8 is too small",
           "max_abs_err": None, "reference_max_abs": 1.0, "onnxruntime_ms": 1.0,
           "missing": "ours (TuneError: a joint budget of 8 is too small)"}
    monkeypatch.setattr(netbench, "run_network_bench", _stub([row]))
    assert cli.main(["bench", "--suite", "networks", "--only", "bert_layer", "--out", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "| bert_layer | 8 |" in out and "ours (TuneError" in out
    assert "error: bert_layer ours: TuneError: a joint budget of 8 is too small" in err
    assert "differs from PyTorch" not in err  # no output of ours to compare


def test_ours_off_from_pytorch_fails_the_run(tmp_path, capsys, monkeypatch):
    row = {"network": "bert_layer", "budget": 8, "ours_ms": 1.0, "max_abs_err": 0.5, "reference_max_abs": 1.0,
           "missing": ""}
    monkeypatch.setattr(netbench, "run_network_bench", _stub([row]))
    assert cli.main(["bench", "--suite", "networks", "--only", "bert_layer", "--out", str(tmp_path)]) == 1
    assert "error: bert_layer: ours differs from PyTorch" in capsys.readouterr().err
    row["max_abs_err"] = 1e-6
    assert cli.main(["bench", "--suite", "networks", "--only", "bert_layer", "--out", str(tmp_path)]) == 0


def test_cold_reaches_the_networks_benchmark_and_is_refused_elsewhere(tmp_path, capsys, monkeypatch):
    row = {"network": "bert_layer", "budget": 8, "ours_ms": 1.0, "max_abs_err": 1e-6, "reference_max_abs": 1.0,
           "missing": ""}
    seen: dict = {}
    monkeypatch.setattr(netbench, "run_network_bench", _stub([row], seen))
    args = ["bench", "--suite", "networks", "--only", "bert_layer", "--out", str(tmp_path)]
    assert cli.main(args) == 0 and seen == {"cold": False}
    assert cli.main([*args, "--cold"]) == 0 and seen == {"cold": True}
    capsys.readouterr()
    assert cli.main(["bench", "--cold", "--out", str(tmp_path)]) == 2
    assert "--cold applies to --suite networks only" in capsys.readouterr().err
