"""The command line on good and bad session files (each run as a user would, in a subprocess)."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "data" / "bad_sessions"

# file -> a fragment of the one-line error it must give
EXPECTED = {
    "truncated.json": "not valid JSON",
    "wrong_version.json": 'field "version": unsupported version 2',
    "wrong_format.json": 'field "format" must be "alt-workbench-session"',
    "unknown_model.json": "unknown zoo model 'resnet9000'",
    "unknown_tensor.json": "action 0 (layout on 'nope'): unknown tensor 'nope'",
    "bad_split.json": "action 1 (layout on 'conv'): split factors [3, 16] multiply to 48 but dim 1 (C) has 64",
    "tvm_refuses.json": "action 0 (loop on 'conv'): loop step 0: vectorize(block=conv, loop=rc) refused by TVM",
    "unknown_op.json": "no kernel 'nope' under the current layouts",
    "unknown_kind.json": 'action 0: field "kind" must be one of',
    "missing_field.json": 'action 0 (layout): missing field "args"',
    "bad_name.json": "not a valid session name",
    "not_an_object.json": "a session file is a JSON object",
}


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_the_corpus_covers_every_file():
    assert sorted(EXPECTED) == sorted(p.name for p in BAD.glob("*.json"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_session_is_refused_and_left_untouched(name, tmp_path):
    path = BAD / name
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    res = run("replay", str(path), "--out", str(tmp_path / "out"))
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and EXPECTED[name] in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not (tmp_path / "out" / "report.json").exists()


def test_replay_writes_kernels_program_and_report(tmp_path):
    res = run("replay", "sessions/r18_stem_alt_tiled.json", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] is True and report["max_rel_error"] < 1e-4
    assert {k["name"] for k in report["kernels"]} == {"pad", "conv", "convert_relu_out"}
    assert all(k["latency_ms"] > 0 and k["gflops"] >= 0 for k in report["kernels"])
    assert (tmp_path / "kernels.so").stat().st_size > 0
    assert "def conv(" in (tmp_path / "program.py").read_text()


def test_bad_target_and_missing_file_are_user_errors(tmp_path):
    res = run("replay", "sessions/r18_stem_nchw.json", "--target", "{oops", "--out", str(tmp_path))
    assert res.returncode == 2 and "--target must be a JSON object" in res.stderr
    res = run("replay", str(tmp_path / "absent.json"))
    assert res.returncode == 2 and "cannot read session" in res.stderr
