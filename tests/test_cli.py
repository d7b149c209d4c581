"""The command line on good and bad session files (each run as a user would, in a subprocess)."""

import hashlib
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import cli

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "data" / "bad_sessions"

# file -> fragments of the one-line error it must give (all of them)
EXPECTED = {
    "truncated.json": ("not valid JSON",),
    "not_an_object.json": ("a session file is a JSON object",),
    "wrong_version.json": ('field "version": unsupported version 3',),
    "wrong_format.json": ('field "format" must be "alt-workbench-session"',),
    "bad_name.json": ('field "name"', "not a valid session name"),
    "unknown_model.json": ('field "model"', "unknown zoo model 'resnet9000'"),
    "unknown_kind.json": ('action 0: field "kind" must be one of',),
    "missing_field.json": ('action 0 (layout): missing field "args"',),
    "unknown_tensor.json": ("action 0 (layout on 'nope'): unknown tensor 'nope'",),
    "unknown_preset.json": ("action 0 (layout on 'conv'): unknown preset 'nhwc'",),
    "bad_split.json": ("action 1 (layout on 'conv'): split factors [3, 16] multiply to 48 but dim 1 (C) has 64",),
    "unknown_op.json": ("action 0 (loop on 'nope')", "no kernel 'nope' under the current layouts"),
    "unknown_loop_primitive.json": ("action 0 (loop on 'conv')", "unknown loop primitive 'tile'"),
    "bad_loop_args.json": ("action 2 (loop on 'conv')", "split factors [3, 16] multiply to 48 but loop 'i3' has extent 112"),
    "tvm_refuses.json": ("action 0 (loop on 'conv')", "compute_inline", "TVM refused"),
    "bad_tuned_trace.json": ("action 0 (tuned on 'conv')", "the saved trace does not apply to this kernel"),
    "bad_pin.json": ('field "pinned": entry 0: step 0 (loop): missing field "args"',),
}


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_the_corpus_covers_every_file():
    assert sorted(EXPECTED) == sorted(p.name for p in BAD.glob("*.json"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_session_is_refused_and_left_untouched(name, tmp_path):
    path = BAD / name
    before = path.read_bytes()
    res = run("replay", str(path), "--out", str(tmp_path / "out"))
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, res.stderr
    for fragment in EXPECTED[name]:
        assert fragment in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert path.read_bytes() == before  # byte for byte
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.slow
def test_replay_writes_kernels_program_and_report(tmp_path):
    res = run("replay", "sessions/r18_stem_alt_tiled.json", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] is True and report["max_rel_error"] < 1e-4 and report["max_abs_error"] >= 0
    assert [k["name"] for k in report["kernels"]] == ["pad", "conv", "convert_relu_out"]
    for k in report["kernels"]:
        assert {"name", "latency_ms", "spread_ms", "gflops"} <= set(k)
        assert k["latency_ms"] > 0 and k["spread_ms"] >= 0 and k["gflops"] >= 0
    assert report["total_ms"] == pytest.approx(sum(k["latency_ms"] for k in report["kernels"]))
    assert (tmp_path / "kernels.so").stat().st_size > 0
    assert "def conv(" in (tmp_path / "program.py").read_text()
    assert "conv" in res.stdout and "ok: True" in res.stdout
    total = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("total:"))
    assert f"{report['total_ms']:.4f} ms median (min {report['total_min_ms']:.4f}, spread" in total


def test_export_writes_the_database_session_and_manifest(tmp_path):
    res = run("export", "sessions/c1d.json", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert {p.name for p in tmp_path.iterdir()} >= {"database_workload.json", "database_tuning_record.json",
                                                     "session.json", "manifest.json"}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["tvm_version"] and manifest["target"]["kind"] == "llvm"
    assert [k["name"] for k in manifest["kernels"]] == ["conv"]
    assert (tmp_path / "session.json").read_text() == (ROOT / "sessions" / "c1d.json").read_text()


@pytest.mark.slow
def test_bad_target_and_missing_file_are_user_errors(tmp_path):
    res = run("replay", "sessions/c1d.json", "--target", "{oops", "--out", str(tmp_path))
    assert res.returncode == 2 and "--target must be a JSON object" in res.stderr
    assert "Traceback" not in res.stderr
    res = run("replay", str(tmp_path / "absent.json"))
    assert res.returncode == 2 and "cannot read session" in res.stderr and "Traceback" not in res.stderr


########## In process (no subprocess needed) ##########

def test_the_network_benchmark_refuses_an_unknown_network_or_contender(tmp_path, capsys):
    assert cli.main(["bench", "--suite", "networks", "--only", "vgg", "--out", str(tmp_path)]) == 2
    assert "no network 'vgg'" in capsys.readouterr().err
    assert cli.main(["bench", "--suite", "networks", "--contenders", "ours,tensorrt", "--out", str(tmp_path)]) == 2
    assert "no contender 'tensorrt'; the contenders: ours, torch" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before anything ran


def test_the_conversion_benchmark_refuses_an_unknown_case(tmp_path, capsys):
    assert cli.main(["bench", "--suite", "conversions", "--only", "nchw4c", "--out", str(tmp_path)]) == 2
    assert "no case 'nchw4c'; the cases: nchw16c, nhwc" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_training_benchmark_refuses_an_unknown_model_and_runs_the_chosen_ones(monkeypatch, tmp_path, capsys):
    from workbench.bench import training as trainbench

    assert cli.main(["bench", "--suite", "training", "--only", "resnet", "--out", str(tmp_path)]) == 2
    assert "no model 'resnet'" in capsys.readouterr().err
    ran = []

    def fake(names, out_dir, target, on_step=lambda msg: None):
        ran.append(tuple(names))
        (out_dir / "training.md").write_text("| model | ours |\n")
        return [{"model": n, "verified": n != "capsnet"} for n in names]

    monkeypatch.setattr(trainbench, "run_training_bench", fake)
    assert cli.main(["bench", "--suite", "training", "--only", "lltm", "--out", str(tmp_path)]) == 0
    assert ran == [("lltm",)] and "| model | ours |" in capsys.readouterr().out
    assert cli.main(["bench", "--suite", "training", "--out", str(tmp_path)]) == 1  # capsnet did not verify
    assert ran[-1] == trainbench.EXAMPLE_NAMES and "lltm_large" in ran[-1]


def test_a_mismatch_exits_with_1(monkeypatch, tmp_path, capsys):
    from workbench.engine.session import artifacts as replay

    class Report:
        ok, max_abs_error, max_rel_error, total_ms, kernels = False, 1.0, 0.5, 1.0, []
        total_min_ms, total_spread_ms, repeats, noisy, source, network = 0.9, 0.2, 5, False, None, None

    monkeypatch.setattr(replay, "replay_to", lambda *a, **k: Report())
    assert cli.main(["replay", "sessions/c1d.json", "--out", str(tmp_path)]) == 1
    assert "error: outputs differ from the reference" in capsys.readouterr().err


def test_help_lists_every_command():
    text = cli.parser().format_help()
    for command in ("replay", "export", "tune", "bench", "ceilings", "import", "run"):
        assert command in text


@pytest.mark.tuning
def test_tune_joint_writes_a_session_that_replays_to_the_tuned_kernels(tmp_path):
    """The joint stage with a tiny budget on C1D: the tuned session holds the chosen layout and
    trace, and replays (no tuning) to kernels that match the reference."""
    out = tmp_path / "c1d_tuned.json"
    r = run("tune", str(ROOT / "sessions" / "c1d.json"), "--stage", "joint", "--budget", "6",
            "--work-dir", str(tmp_path / "work"), "--out", str(out), "--profile", "--keep-tuned")
    assert r.returncode == 0, r.stderr
    assert "conv: 6 measurements, " in r.stderr and " layout candidates" in r.stderr  # the plan, first
    # where the time went: the profiler's scopes, each with its share and seconds per measurement
    table = r.stdout.split("where a measurement's time goes (MetaSchedule's profiler, 6 measurements", 1)[1]
    assert len(re.findall(r"\d+\.\d\d s +\d+\.\d% +\d+\.\d{3} s/measurement", table)) >= 3, table
    tuned = json.loads(out.read_text())
    acts = [a for a in tuned["actions"] if a["kind"] == "tuned"]
    assert len(acts) == 1 and acts[0]["op"] == "conv" and acts[0]["latency_ms"] > 0 and acts[0]["trace"]
    lines = (tmp_path / "work" / "progress.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert 1 <= len(rows) <= 6 and {r["stage"] for r in rows} <= {"joint", "loop"} and rows[0]["stage"] == "joint"
    assert all({"task", "stage", "trial", "layout", "trace_id", "latency_ms", "error", "predicted", "best_ms",
                "time"} <= set(r) for r in rows)
    rep = run("replay", str(out), "--out", str(tmp_path / "replay"))
    assert rep.returncode == 0, rep.stderr
    report = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert report["ok"] and {k["name"]: k["schedule"] for k in report["kernels"]}["conv"] == "tuned"


########## import ##########

@pytest.mark.slow
def test_import_writes_a_session_that_replays_and_refuses_a_changed_file(tmp_path):
    from tests.engine.models.frontend.test_import import _onnx

    model = tmp_path / "tiny.onnx"
    model.write_bytes(_onnx())
    res = run("import", str(model), "--out", str(tmp_path / "s.json"), "--name", "tiny")
    assert res.returncode == 0, res.stderr
    assert "imported tiny.onnx: 2 ops (GMM 1, relu 1)" in res.stdout and "x=(1, 8)" in res.stdout
    spec = json.loads((tmp_path / "s.json").read_text())["model"]
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    assert spec == {"file": str(model), "sha256": digest, "inputs": {"x": [1, 8]}}
    rep = run("replay", str(tmp_path / "s.json"), "--out", str(tmp_path / "out"))
    assert rep.returncode == 0 and "ok: True" in rep.stdout, rep.stderr
    model.write_bytes(_onnx("Sigmoid"))  # another model under the same name
    rep = run("replay", str(tmp_path / "s.json"), "--out", str(tmp_path / "out2"))
    assert rep.returncode == 2 and "Traceback" not in rep.stderr
    assert [ln for ln in rep.stderr.splitlines() if ln.startswith("error:")] == [
        f'error: field "model": model file {model} changed since the session was made (its sha256 is now '
        f'{hashlib.sha256(model.read_bytes()).hexdigest()[:12]}..., the session has {spec["sha256"][:12]}...): '
        "re-import it to start a new session"]
    assert not (tmp_path / "out2").exists()


@pytest.mark.slow
def test_import_of_a_factory_exports_it_beside_the_session(tmp_path):
    (tmp_path / "mymodels.py").write_text(
        "from workbench.engine.models.networks import BertLayer, randomize\n"
        "def small():\n    return randomize(BertLayer(32, 4, 64), 5)\n")
    res = subprocess.run([sys.executable, "-m", "workbench", "import", "mymodels:small", "--input", "data=1,8,32",
                          "--out", str(tmp_path / "b.json")], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    spec = json.loads((tmp_path / "b.json").read_text())["model"]
    assert spec["origin"] == "mymodels:small" and spec["file"] == str(tmp_path / "b.pt2")
    assert spec["inputs"] == {"data": [1, 8, 32]} and (tmp_path / "b.pt2").is_file()
    assert "imported b.pt2: 29 ops (GMM 8," in res.stdout


def test_every_bad_model_is_refused_with_status_2_in_one_line(tmp_path, capsys):
    from tests.engine.models.frontend.test_import import bad_models

    for name, (args, fragment) in bad_models(tmp_path).items():
        out = tmp_path / f"{name}.json"
        capsys.readouterr()
        assert cli.main(["import", *args, "--out", str(out)]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], (name, err)
        assert not out.exists() and not out.with_suffix(".pt2").exists(), name
