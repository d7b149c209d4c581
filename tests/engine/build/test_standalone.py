"""The runnable network a replay writes (network.so on the Relax VM; kernels.so kernel by kernel in
older folders): NumPy and torch callers, bad inputs, bad folders, the CLI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.engine.base.errors import SessionError
from workbench.engine.session.artifacts import replay_to
from workbench.engine.session.session import load, replay
from workbench.engine.build.standalone import load_network

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """r18_stem on ALT's tiled layouts (padded, unfolded buffers): its replay folder and state."""
    out = tmp_path_factory.mktemp("replay")
    session = load(ROOT / "sessions" / "r18_stem_alt_tiled.json")
    assert replay_to(session, out).ok
    return out, replay(session)


def _reference(state, inputs: dict) -> dict:
    values = {**state.graph.random_inputs(0), **inputs}  # the replay's constants are those of seed 0
    ref = state.graph.reference(values)
    return {t: ref[t] for t in state.program.plan.outputs}


def test_numpy_in_numpy_out_twice_with_no_state_left_over(replayed):
    out, state = replayed
    net = load_network(out)
    assert net.inputs == {t: state.graph.tensors[t].shape for t in state.graph.inputs}
    rng = np.random.default_rng(5)
    for _ in range(2):  # the second call must not see the first one's outputs or temporaries
        x = {t: rng.uniform(-1, 1, s).astype("float32") for t, s in net.inputs.items()}
        got, want = net(**x), _reference(state, x)
        for t in want:
            assert isinstance(got[t], np.ndarray)
            np.testing.assert_allclose(got[t], want[t], rtol=1e-4, atol=1e-4 * float(np.abs(want[t]).max()))


def test_torch_tensors_pass_by_dlpack_and_come_back_as_torch(replayed):
    import torch

    out, state = replayed
    net = load_network(out)
    x = {t: torch.rand(s) * 2 - 1 for t, s in net.inputs.items()}
    first = net(*x.values())  # by position too
    kept = {t: v.clone() for t, v in first.items()}
    net(**{t: torch.rand(s) for t, s in net.inputs.items()})
    want = _reference(state, {t: v.numpy() for t, v in x.items()})
    for t in want:
        assert isinstance(first[t], torch.Tensor) and torch.equal(first[t], kept[t])  # a later call left it alone
        np.testing.assert_allclose(first[t].numpy(), want[t], rtol=1e-4, atol=1e-4 * float(np.abs(want[t]).max()))


def test_bad_inputs_and_folders_are_named(replayed, tmp_path):
    out, _ = replayed
    net = load_network(out)
    name, shape = next(iter(net.inputs.items()))
    with pytest.raises(SessionError, match=f"input {name} has shape \\(2,\\); the network takes"):
        net(np.zeros(2, "float32"))
    with pytest.raises(SessionError, match=f"missing input {name}"):
        net()
    with pytest.raises(SessionError, match="no input named 'nope'"):
        net(np.zeros(shape, "float32"), nope=1)
    with pytest.raises(SessionError, match="no network.json"):
        load_network(tmp_path)
    (tmp_path / "network.json").write_bytes((out / "network.json").read_bytes())
    with pytest.raises(SessionError, match="no network.so, kernels.so, constants.npz"):
        load_network(tmp_path)
    for f in ("kernels.so", "constants.npz"):
        (tmp_path / f).write_bytes((out / f).read_bytes())
    (tmp_path / "network.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(SessionError, match="is not a network description written by replay"):
        load_network(tmp_path)


def test_a_folder_without_network_so_runs_kernel_by_kernel_alike(replayed, tmp_path):
    """Folders written before network.so existed (no network.so, no ``vm`` in network.json) still run."""
    out, state = replayed
    assert load_network(out).engine == "relax-vm"
    spec = json.loads((out / "network.json").read_text())
    del spec["vm"]
    (tmp_path / "network.json").write_text(json.dumps(spec))
    for f in ("kernels.so", "constants.npz"):
        (tmp_path / f).write_bytes((out / f).read_bytes())
    old = load_network(tmp_path)
    assert old.engine == "kernel-loop" and old.inputs == load_network(out).inputs
    x = {t: np.random.default_rng(6).uniform(-1, 1, s).astype("float32") for t, s in old.inputs.items()}
    got, new, want = old(**x), load_network(out)(**x), _reference(state, x)
    for t in want:
        np.testing.assert_allclose(got[t], want[t], rtol=1e-4, atol=1e-4 * float(np.abs(want[t]).max()))
        np.testing.assert_allclose(new[t], got[t], rtol=1e-4, atol=1e-4 * float(np.abs(want[t]).max()))


@pytest.mark.slow
def test_the_run_command_reads_npy_inputs_and_writes_the_outputs(replayed, tmp_path):
    out, state = replayed
    net = load_network(out)
    (name, shape), = net.inputs.items()
    x = np.random.default_rng(9).uniform(-1, 1, shape).astype("float32")
    np.save(tmp_path / "x.npy", x)
    res = subprocess.run([sys.executable, "-m", "workbench", "run", str(out), "--input", f"{name}={tmp_path / 'x.npy'}",
                          "--out", str(tmp_path / "y.npz"), "--repeat", "2"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "ms median over 2 runs" in res.stdout and "network.so on the Relax VM" in res.stdout
    with np.load(tmp_path / "y.npz") as y:
        want = _reference(state, {name: x})
        assert set(y.files) == set(want)
        for t in want:
            np.testing.assert_allclose(y[t], want[t], rtol=1e-4, atol=1e-4 * float(np.abs(want[t]).max()))
    bad = subprocess.run([sys.executable, "-m", "workbench", "run", str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "is not a replay folder with a runnable network" in bad.stderr
