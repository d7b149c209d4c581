"""Every example session replays headlessly to verified kernels that TVM can load again."""

import json
from pathlib import Path

import numpy as np
import pytest
import tvm

from workbench.engine.lower import stored_constants
from workbench.engine.replay import replay_to
from workbench.engine.session import load, replay

SESSIONS = sorted((Path(__file__).resolve().parents[2] / "sessions").glob("*.json"))


def test_there_is_a_session_per_zoo_model():
    from workbench.engine.zoo import MODELS

    models = {load(p).model["zoo"] for p in SESSIONS}
    assert models == set(MODELS)


def _run_library(lib, plan, values: dict) -> dict:
    """Run every kernel of ``kernels.so`` in order, as a user would from the plan; the graph outputs."""
    dev = tvm.cpu()
    host = {b.name: values[b.tensor] for b in plan.buffers.values() if b.source == "input"}
    host.update(stored_constants(plan, values))
    bufs = {b.name: tvm.runtime.tensor(np.ascontiguousarray(host[b.name], dtype="float32") if b.name in host
                                       else np.zeros(b.layout.shape, "float32"), dev) for b in plan.buffers.values()}
    for k in plan.kernels:
        lib[k.name](*(bufs[b] for b in k.inputs + k.outputs))
    return {t: bufs[b].numpy() for t, b in plan.outputs.items()}


@pytest.mark.parametrize("path", SESSIONS, ids=[p.stem for p in SESSIONS])
def test_example_session_replays_ok(path, tmp_path):
    session = load(path)
    report = replay_to(session, tmp_path)
    assert report.ok and report.max_rel_error < 1e-4
    written = json.loads((tmp_path / "report.json").read_text())
    assert written["ok"] is True and {"max_abs_error", "max_rel_error", "total_ms", "kernels"} <= set(written)
    for k in written["kernels"]:
        assert {"name", "latency_ms", "spread_ms", "gflops"} <= set(k) and k["latency_ms"] > 0
    assert any(k["schedule"] != "default" for k in written["kernels"])  # every example schedules something
    assert (tmp_path / "program.py").read_text().count("@T.prim_func") == len(report.kernels)

    # kernels.so, loaded back, computes the model (checked against the reference)
    lib = tvm.runtime.load_module(str(tmp_path / "kernels.so"))
    plan = replay(session).program.plan
    values = plan.graph.random_inputs(3)
    got = _run_library(lib, plan, values)
    ref = plan.graph.reference(values)
    for t, v in got.items():
        np.testing.assert_allclose(v, ref[t], rtol=1e-4, atol=1e-4 * float(np.abs(ref[t]).max()))


def test_a_single_kernel_from_kernels_so_runs(tmp_path):
    s = load(next(p for p in SESSIONS if p.stem == "gmm_nkn"))
    replay_to(s, tmp_path)
    lib = tvm.runtime.load_module(str(tmp_path / "kernels.so"))
    a = np.random.default_rng(0).uniform(-1, 1, (1024, 1024)).astype("float32")
    out = tvm.runtime.tensor(np.zeros((64, 1024, 16), "float32"), tvm.cpu())
    lib["convert_a_gmm"](tvm.runtime.tensor(a, tvm.cpu()), out)
    assert np.array_equal(out.numpy(), a.reshape(64, 16, 1024).transpose(0, 2, 1))


def test_a_target_override_is_recorded(tmp_path):
    s = load(next(p for p in SESSIONS if p.stem == "c1d"))
    report = replay_to(s, tmp_path, target={"kind": "llvm", "num-cores": 1})
    assert report.ok and report.target == {"kind": "llvm", "num-cores": 1}
