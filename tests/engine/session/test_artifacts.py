"""Every example session replays headlessly to verified kernels that TVM can load again."""

import json
from pathlib import Path

import numpy as np
import pytest
import tvm

from workbench.engine.session.artifacts import replay_to
from workbench.engine.session.session import load, replay
from workbench.engine.build.standalone import load_network

SESSIONS = sorted((Path(__file__).resolve().parents[3] / "sessions").glob("*.json"))
#: examples that take seconds to replay: the fast lane (``make test-fast``) replays the others
SLOW = {"bert_tiny_layer", "gmm_nkn", "mv2_block", "r18_stem_blocked16", "r18_stem_nchw", "r18_stem_nhwc"}


def test_there_is_a_session_per_zoo_model():
    from workbench.engine.models.zoo import MODELS

    models = {load(p).model["zoo"] for p in SESSIONS}
    assert models == set(MODELS)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] * (p.stem in SLOW))
                                  for p in SESSIONS])
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

    # the runnable network (kernels.so and the replay's constants), on new inputs, computes the model
    net = load_network(tmp_path)
    state = replay(session)
    graph = state.graph
    fresh = graph.random_inputs(3)
    values = {**graph.random_inputs(0), **{t: fresh[t] for t in graph.inputs}}  # constants: the replay's (seed 0)
    got = net(**{t: values[t] for t in graph.inputs})
    ref = graph.reference(values)
    assert set(got) == set(state.program.plan.outputs)
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
