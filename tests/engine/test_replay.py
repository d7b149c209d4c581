"""Every example session replays headlessly to verified kernels that TVM can load again."""

from pathlib import Path

import numpy as np
import pytest
import tvm

from workbench.engine.replay import replay_to
from workbench.engine.session import load

SESSIONS = sorted((Path(__file__).resolve().parents[2] / "sessions").glob("*.json"))


def test_there_is_a_session_per_zoo_model():
    from workbench.engine.zoo import MODELS

    models = {load(p).model["zoo"] for p in SESSIONS}
    assert models == set(MODELS)


@pytest.mark.parametrize("path", SESSIONS, ids=[p.stem for p in SESSIONS])
def test_example_session_replays_ok(path, tmp_path):
    report = replay_to(load(path), tmp_path)
    assert report.ok and report.max_rel_error < 1e-4
    assert all(k["latency_ms"] > 0 for k in report.kernels)
    lib = tvm.runtime.load_module(str(tmp_path / "kernels.so"))
    first = report.kernels[0]["name"]
    assert lib[first] is not None
    assert (tmp_path / "program.py").read_text().count("@T.prim_func") == len(report.kernels)


def test_a_kernel_from_kernels_so_runs(tmp_path):
    s = load(next(p for p in SESSIONS if p.stem == "gmm_nkn"))
    replay_to(s, tmp_path)
    lib = tvm.runtime.load_module(str(tmp_path / "kernels.so"))
    a = np.random.default_rng(0).uniform(-1, 1, (1024, 1024)).astype("float32")
    out = tvm.runtime.tensor(np.zeros((64, 1024, 16), "float32"), tvm.cpu())
    lib["convert_a_gmm"](tvm.runtime.tensor(a, tvm.cpu()), out)
    assert np.array_equal(out.numpy(), a.reshape(64, 16, 1024).transpose(0, 2, 1))
