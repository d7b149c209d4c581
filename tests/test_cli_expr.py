"""The command line on ``.expr`` files (expression ops), run as a user would in a
subprocess: ``import`` writes a session, ``replay`` builds and checks it against the NumPy
interpreter, ``run`` computes its outputs from .npy inputs; a bad file exits 2 in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.engine.ir.expr import expr_graph, read_expr

ROOT = Path(__file__).resolve().parents[1]

MODEL = """# a strided conv, a ReLU times a bias, a max pool and a softmax over the channels
input inp[1, 3, 11, 9]
input w[5, 3, 3, 2]
input bias[5]
conv: out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]
act: out[n, k, y, x] = max(conv[n, k, y, x], 0) * bias[k]
pool[1, 5, 2, 2]: out[n, k, y, x] max= act[n, k, 2*y + u, 2*x + v]
mx: out[n, y, x] max= pool[n, k, y, x]
e: out[n, k, y, x] = exp(pool[n, k, y, x] - mx[n, y, x])
total: out[n, y, x] += e[n, k, y, x]
softmax: out[n, k, y, x] = e[n, k, y, x] / total[n, y, x]
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def run_on(tmp_path: Path, values: dict) -> dict:
    """``run`` of the network replayed to tmp_path/replay on ``values`` (saved as float32 .npy)."""
    args = []
    for name, v in values.items():
        np.save(tmp_path / f"{name}.npy", v.astype("float32"))
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    out = run("run", str(tmp_path / "replay"), *args, "--out", str(tmp_path / "out.npz"), "--repeat", "0")
    assert out.returncode == 0, out.stderr
    return dict(np.load(tmp_path / "out.npz"))


@pytest.mark.slow
def test_import_replay_and_run_an_expr_file(tmp_path):
    model = tmp_path / "net.expr"
    model.write_text(MODEL)
    session = tmp_path / "net.json"
    res = run("import", str(model), "--out", str(session))
    assert res.returncode == 0, res.stderr
    assert "imported net.expr: 7 ops (expr 7)" in res.stdout
    assert "inputs: inp=(1, 3, 11, 9), w=(5, 3, 3, 2), bias=(5,); outputs: softmax=(1, 5, 2, 2)" in res.stdout
    spec = json.loads(session.read_text())["model"]
    assert spec["file"] == str(model) and spec["inputs"] == {"inp": [1, 3, 11, 9], "w": [5, 3, 3, 2], "bias": [5]}

    rep = run("replay", str(session), "--out", str(tmp_path / "replay"))
    assert rep.returncode == 0, rep.stderr
    report = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert report["ok"] and report["max_rel_error"] < 1e-4 and report.get("source") is None

    rng = np.random.default_rng(7)
    values = {"inp": rng.uniform(-1, 1, (1, 3, 11, 9)), "w": rng.uniform(-1, 1, (5, 3, 3, 2)),
              "bias": rng.uniform(0.5, 1, (5,))}
    got = run_on(tmp_path, values)["softmax"]
    graph = expr_graph(read_expr(MODEL), "net")
    want = graph.reference({k: v.astype("float32") for k, v in values.items()})["softmax"]
    assert got.shape == want.shape == (1, 5, 2, 2)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-5)  # a softmax over the channels
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_a_bad_expr_file_exits_2_with_its_line_and_column(tmp_path):
    model = tmp_path / "bad.expr"
    model.write_text("input a[4]\ninput b[5]\nf: out[i] = a[i] + b[i]\n")
    res = run("import", str(model), "--out", str(tmp_path / "s.json"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        "error: line 3, column 15: bad.expr: op f: index i has inconsistent extents: 4 from a (dim 0: i), 5 from b "
        "(dim 0: i)"]
    assert not (tmp_path / "s.json").exists()


BACKWARD = """# a strided conv, a tanh with a bias, an overlapping max pool
input inp[1, 2, 9, 7]
input w[3, 2, 3, 2]
input b[3]
conv: out[n, k, y, x] += inp[n, c, 2*y + r, x + s] * w[k, c, r, s]
act: out[n, k, y, x] = tanh(conv[n, k, y, x] + b[k])
pool: out[n, k, p, q] max= act[n, k, p + u, 2*q + v] for u < 2, v < 2
"""


@pytest.mark.slow
def test_import_backward_replays_and_runs_the_gradients_of_pytorch(tmp_path):
    import torch
    import torch.nn.functional as F

    model = tmp_path / "net.expr"
    model.write_text(BACKWARD)
    session = tmp_path / "net.json"
    res = run("import", str(model), "--out", str(session), "--backward")
    assert res.returncode == 0, res.stderr
    assert ("inputs: inp=(1, 2, 9, 7), w=(3, 2, 3, 2), b=(3,), grad_pool=(1, 3, 3, 3); outputs: pool=(1, 3, 3, 3), "
            "grad_inp=(1, 2, 9, 7), grad_w=(3, 2, 3, 2), grad_b=(3,)") in res.stdout
    assert json.loads(session.read_text())["model"]["inputs"]["grad_pool"] == [1, 3, 3, 3]

    rep = run("replay", str(session), "--out", str(tmp_path / "replay"))
    assert rep.returncode == 0, rep.stderr
    assert json.loads((tmp_path / "replay" / "report.json").read_text())["ok"]

    rng = np.random.default_rng(11)
    values = {"inp": rng.uniform(-1, 1, (1, 2, 9, 7)), "w": rng.uniform(-1, 1, (3, 2, 3, 2)),
              "b": rng.uniform(-1, 1, (3,)), "grad_pool": rng.uniform(-1, 1, (1, 3, 3, 3))}
    got = run_on(tmp_path, values)

    leaves = {k: torch.tensor(values[k].astype("float32"), dtype=torch.float64, requires_grad=True)
              for k in ("inp", "w", "b")}
    act = torch.tanh(F.conv2d(leaves["inp"], leaves["w"], stride=(2, 1)) + leaves["b"][:, None, None])
    pool = F.max_pool2d(act, (2, 2), stride=(1, 2))
    (pool * torch.tensor(values["grad_pool"])).sum().backward()
    np.testing.assert_allclose(got["pool"], pool.detach().numpy(), rtol=1e-4, atol=1e-5)
    for k, leaf in leaves.items():
        np.testing.assert_allclose(got[f"grad_{k}"], leaf.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.slow
def test_backward_refuses_a_model_that_is_not_expression_ops_and_a_name_it_would_take(tmp_path):
    res = run("import", str(tmp_path / "net.onnx"), "--out", str(tmp_path / "s.json"), "--backward")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "error: net.onnx: gradients are derived for expression ops only: give a .expr file"]
    model = tmp_path / "y.expr"
    model.write_text("input x[3]\ninput grad_y[3]\ny: out[i] = x[i] * grad_y[i]\n")
    res = run("import", str(model), "--out", str(tmp_path / "s.json"), "--backward")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "error: y.expr: the backward pass names a tensor grad_y, which the graph already has: rename it"]
    assert not (tmp_path / "s.json").exists()


@pytest.mark.slow
def test_a_training_step_file_imports_replays_and_runs_one_sgd_step_as_pytorch(tmp_path):
    """``train w, b lr 0.5``: the session is the SGD step; ``run`` of its network.so gives the loss
    and the updated parameters of one ``torch.optim.SGD`` step."""
    import torch

    model = tmp_path / "lin.expr"
    model.write_text("input x[6, 5]\ninput w[4, 5]\ninput b[4]\ntrain w, b lr 0.5\n"
                     "lin: out[n, k] += x[n, c] * w[k, c]\ny: out[n, k] = tanh(lin[n, k] + b[k])\n")
    session = tmp_path / "lin.json"
    res = run("import", str(model), "--out", str(session))
    assert res.returncode == 0, res.stderr
    assert "outputs: loss=(1,), new_w=(4, 5), new_b=(4,)" in res.stdout
    rep = run("replay", str(session), "--out", str(tmp_path / "replay"))
    assert rep.returncode == 0, rep.stderr

    rng = np.random.default_rng(5)
    values = {"x": rng.uniform(-1, 1, (6, 5)), "w": rng.uniform(-1, 1, (4, 5)), "b": rng.uniform(-1, 1, (4,)),
              "target_y": rng.uniform(-1, 1, (6, 4))}
    got = run_on(tmp_path, values)
    w, b = (torch.tensor(values[k].astype("float32"), requires_grad=True) for k in ("w", "b"))
    x, target = (torch.tensor(values[k].astype("float32")) for k in ("x", "target_y"))
    opt = torch.optim.SGD([w, b], lr=0.5)
    loss = torch.nn.functional.mse_loss(torch.tanh(x @ w.T + b), target)
    loss.backward()
    opt.step()
    np.testing.assert_allclose(got["loss"], [loss.item()], rtol=1e-5)
    np.testing.assert_allclose(got["new_w"], w.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["new_b"], b.detach().numpy(), rtol=1e-5, atol=1e-6)
