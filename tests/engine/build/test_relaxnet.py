"""network.so: the whole network as one Relax VM module that plain TVM runs, its kernels as
scheduled, its intermediates in planned (reused) storage."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi

from workbench.engine.base.errors import BuildError
from workbench.engine.build.program import Program
from workbench.engine.build.relaxnet import build_network, network_module, planned_module
from workbench.engine.session.artifacts import replay_to
from workbench.engine.session.session import load, new_session, replay

ROOT = Path(__file__).resolve().parents[3]

#: the child imports tvm and numpy only, runs network.so, and says whether workbench got imported
CHILD = """
import sys, numpy as np, tvm
so, x_path, out_path = sys.argv[1:]
vm = tvm.relax.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())
outs = vm["main"](tvm.runtime.tensor(np.load(x_path)))
np.savez(out_path, *[o.numpy() for o in outs])
print("workbench imported:", any(m == "workbench" or m.startswith("workbench.") for m in sys.modules))
"""


def _run_plain_tvm(so: Path, x: np.ndarray, tmp: Path) -> list[np.ndarray]:
    np.save(tmp / "x.npy", x)
    res = subprocess.run([sys.executable, "-c", CHILD, str(so), str(tmp / "x.npy"), str(tmp / "y.npz")],
                         cwd=tmp, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    assert "workbench imported: False" in res.stdout
    with np.load(tmp / "y.npz") as y:
        return [y[f"arr_{i}"] for i in range(len(y.files))]


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    """r18_block replayed: its folder, state and report."""
    out = tmp_path_factory.mktemp("r18_block")
    session = load(ROOT / "sessions" / "r18_block.json")
    report = replay_to(session, out)
    return out, replay(session), report


@pytest.mark.slow
def test_network_so_runs_in_plain_tvm_and_computes_the_model(block, tmp_path):
    out, state, report = block
    assert report.ok and report.network["ok"] and (out / "network.so").is_file()
    (x_name,) = state.graph.inputs
    assert report.network["inputs"] == {x_name: list(state.graph.tensors[x_name].shape)}
    assert list(report.network["outputs"]) == list(state.graph.outputs)
    x = np.random.default_rng(4).uniform(-1, 1, state.graph.tensors[x_name].shape).astype("float32")
    got = _run_plain_tvm(out / "network.so", x, tmp_path)
    ref = state.graph.reference({**state.graph.random_inputs(0), x_name: x})  # the replay's weights: seed 0
    assert len(got) == len(state.graph.outputs)
    for g, t in zip(got, state.graph.outputs):
        _close(g, ref[t])


@pytest.mark.slow
def test_the_report_says_how_to_call_it_and_what_memory_it_plans(block):
    out, _, report = block
    written = json.loads((out / "report.json").read_text())["network"]
    assert written["file"] == "network.so" and "VirtualMachine" in written["call"]
    assert written["max_rel_error"] < 1e-4 and 0 < written["min_ms"] <= written["latency_ms"]
    mem = written["memory"]
    assert 0 < mem["peak_planned_mb"] <= mem["intermediates_sum_mb"]
    assert json.loads((out / "network.json").read_text())["vm"]["outputs"] == written["outputs"]


def test_intermediates_share_storage_peak_below_their_sum():
    state = replay(load(ROOT / "sessions" / "bert_tiny_layer.json"))  # 19 kernels in a chain
    prog = state.scheduled_program()
    net = build_network(prog, state.graph.random_inputs(0))
    mem = net.memory
    assert mem.intermediates == len({b for k in prog.plan.kernels for b in k.outputs} - set(prog.plan.outputs.values()))
    largest = max(int(np.prod(prog.plan.buffers[b].layout.shape)) * 4 for k in prog.plan.kernels for b in k.outputs)
    assert largest <= mem.planned_bytes < mem.intermediate_bytes
    assert mem.storage_blocks < mem.intermediates


def test_kernels_stay_as_scheduled_and_run_in_plan_order():
    state = replay(load(ROOT / "sessions" / "r18_stem_alt_tiled.json"))  # padded, unfolded buffers
    prog = state.scheduled_program()
    mod = network_module(prog, state.graph.random_inputs(0))
    planned = planned_module(mod)
    for k in prog.plan.kernels:
        want = prog.funcs[k.name].with_attr("global_symbol", k.name)
        assert tvm_ffi.structural_equal(mod[k.name], want) and tvm_ffi.structural_equal(planned[k.name], want)
    called = [b.value.args[0].name_hint for blk in mod["main"].body.blocks for b in blk.bindings
              if isinstance(b.value, tvm.relax.Call) and b.value.op.same_as(tvm.ir.Op.get("relax.call_tir"))]
    assert called == [k.name for k in prog.plan.kernels]


def test_a_plan_that_reads_a_buffer_before_it_is_written_is_refused():
    state = replay(load(ROOT / "sessions" / "r18_block.json"))
    prog = state.scheduled_program()
    backwards = Program(replace(prog.plan, kernels=prog.plan.kernels[::-1]), prog.funcs, prog.flops)
    with pytest.raises(BuildError, match=r"reads .*, which no earlier kernel writes"):
        network_module(backwards, state.graph.random_inputs(0))


@pytest.mark.slow
def test_an_imported_onnx_model_runs_as_network_so(tmp_path):
    """A small ONNX model (pool, conv, relu, conv, relu: tiled inputs with zero halos), expert
    scheduled, against ONNX Runtime."""
    from tests.engine.tuning.test_stages import _pool_convs
    from workbench.engine.models import zoo
    from workbench.engine.models.frontend.framework import framework_outputs

    spec, _ = zoo.file_model(str(_pool_convs(tmp_path / "pool_convs.onnx")))
    state = replay(new_session(spec)).with_expert_schedules()
    report = replay_to(state.session, tmp_path / "replay")
    assert report.ok and report.network["ok"] and report.source["ok"]
    x = np.random.default_rng(2).uniform(-1, 1, (1, 8, 18, 18)).astype("float32")
    (got,) = _run_plain_tvm(tmp_path / "replay" / "network.so", x, tmp_path)
    (want,) = framework_outputs(state.session.model, [x])
    _close(got, want)
