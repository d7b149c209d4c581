"""Ours beside ONNX Runtime and OpenVINO, op by op (engine.byop, engine.engines' profiles)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engine.measure.byop import BY_OP_COLUMNS, OnnxNode, by_op_frame, by_op_rows, engine_to_onnx, match_ops, ort_node_times


def _tiny_cnn_onnx(path):
    """A conv, a residual block and a linear head: what the engines fuse and re-lay out."""
    import torch

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.body = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            y = torch.relu(self.stem(x))
            y = torch.relu(self.body(y) + y)
            return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))

    x = torch.rand(1, 3, 16, 16)
    torch.onnx.export(Net().eval(), (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    return x.numpy()


def test_every_onnx_runtime_and_openvino_node_of_an_imported_model_maps_to_one_of_our_ops(tmp_path):
    """The model imported as a user imports it, profiled by both engines as the bench does: every
    node each engine ran stands for an ONNX node, and every ONNX node for one of our ops (the
    compute op of its segment)."""
    from workbench.engine.measure import engines
    from workbench.engine.models.frontend.sources import import_file

    path = tmp_path / "tiny.onnx"
    x = _tiny_cnn_onnx(path)
    ours = [(n.name, n.type) for n in import_file(path).nodes]
    nodes = engines.onnx_nodes(path)
    match = match_ops(nodes, ours)
    assert not match.unmapped and set(match.onnx_to_ours) == {n.name for n in nodes}
    heads = [name for name, t in ours if t.startswith(("conv", "matmul"))]
    assert len(heads) == 3 and set(match.onnx_to_ours.values()) == set(heads)
    assert [match.onnx_to_ours[n.name] for n in nodes if n.op_type in ("Conv", "Gemm")] == heads
    profiles = engines.profiles(path, x, threads=1, runs=3)
    for engine in ("onnxruntime", "openvino"):
        prof = profiles[engine]
        assert "error" not in prof, prof
        assert prof["times"] and all(ms >= 0 for ms in prof["times"].values())
        for node in prof["times"]:
            assert match.onnx_to_ours.get(prof["to_onnx"].get(node) or "") in heads, (engine, node, prof["to_onnx"])
    kernels = [{"kernel": f"k_{h}", "ms": 1.0 + i, "ops": h} for i, h in enumerate(heads)]
    rows, unmapped = by_op_rows(ours, kernels, nodes, {e: (p["times"], p["to_onnx"]) for e, p in profiles.items()})
    assert unmapped == {"onnx": [], "onnxruntime": [], "openvino": []}
    total = sum(profiles["onnxruntime"]["times"].values())
    assert sum(r["onnxruntime_ms"] for r in rows) == pytest.approx(total)
    frame = by_op_frame(rows)
    assert list(frame.columns) == list(BY_OP_COLUMNS) and list(frame["ours_ms"]) == [3.0, 2.0, 1.0]


def test_ops_are_matched_by_segment_and_a_different_count_of_compute_ops_maps_nothing():
    onnx = [OnnxNode("c1", "Conv"), OnnxNode("r1", "Relu"), OnnxNode("c2", "Conv"), OnnxNode("a", "Add"),
            OnnxNode("g", "Gemm")]
    ours = [("conv1", "conv2d"), ("conv1_bias", "bias_add"), ("relu1", "relu"), ("conv2", "conv2d"),
            ("add1", "add"), ("dense1", "matmul")]
    assert match_ops(onnx, ours).onnx_to_ours == {"c1": "conv1", "r1": "conv1", "c2": "conv2", "a": "conv2",
                                                  "g": "dense1"}
    short = match_ops(onnx, ours[:4])
    assert not short.onnx_to_ours and "3 convolutions and matrix products, ours 2" in short.unmapped["g"]


def test_an_engine_node_maps_through_its_fused_layers_its_outputs_its_name_or_the_data_flow():
    onnx = [OnnxNode("/c/Conv", "Conv", ("t1",)), OnnxNode("/r/Relu", "Relu", ("t2",)),
            OnnxNode("/m/MatMul", "MatMul", ("t3",), ("t2",))]
    engine = [OnnxNode("reorder", "ReorderInput", ("x_nchwc",), ("x",)),  # internal: its consumer's
              OnnxNode("t2_nchwc", "Conv", ("t2_nchwc",), ("x_nchwc",)),  # an ONNX tensor's name, suffixed
              OnnxNode("fused", "FC", ("o",), ("t2_nchwc",)),
              OnnxNode("/m/MatMul/MatMulAddFusion", "Gemm", ("internal",)),
              OnnxNode("tail", "Reshape", ("y",), ("internal",))]  # last: its producer's
    got = engine_to_onnx(engine, onnx, fused={"fused": ["/m/MatMul", "/r/Relu"]})
    assert got == {"reorder": "/r/Relu", "t2_nchwc": "/r/Relu", "fused": "/r/Relu",
                   "/m/MatMul/MatMulAddFusion": "/m/MatMul", "tail": "/m/MatMul"}


def test_onnx_runtime_profile_is_read_as_the_median_per_run_of_each_node():
    def node(name, ts, us):
        return {"cat": "Node", "ph": "X", "name": f"{name}_kernel_time", "ts": ts, "dur": us}

    def run(ts):
        return {"cat": "Session", "ph": "X", "name": "model_run", "ts": ts, "dur": 10}

    trace = [node("a", 1, 1000), node("b", 2, 500), node("b", 3, 500), run(4),
             node("a", 5, 3000), node("b", 6, 2000), run(7),
             node("a", 8, 2000), run(9), {"cat": "Node", "ph": "X", "name": "a_fence_before", "ts": 9, "dur": 99}]
    got = ort_node_times(trace)
    assert got == {"a": pytest.approx(2.0), "b": pytest.approx(1.0)}
    assert np.isclose(sum(got.values()), 3.0)
