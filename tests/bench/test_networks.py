"""The networks benchmark (``bench.networks``) on a decoder layer: several inputs (the token and
its K/V cache) and several outputs (the hidden state and the grown cache) through every
contender, and the decode step's weight streaming against the copy ceiling (``bench.streaming``).
The BERT layer's run is in tests/bench/test_suite.py."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from workbench.bench.network_contenders import as_outputs, max_error, network_inputs, onnx_input_names
from workbench.bench.streaming import matmul_weight_bytes, weight_streaming

TINY_DECODE = dict(hidden=64, heads=4, kv_heads=2, mlp=96, past=6)


def test_inputs_are_seeded_per_input_and_errors_are_the_worst_output():
    import torch

    example = (torch.zeros(1, 1, 8), torch.zeros(1, 2, 3, 4))
    xs = network_inputs(example)
    assert [x.shape for x in xs] == [(1, 1, 8), (1, 2, 3, 4)] and all(x.dtype == np.float32 for x in xs)
    assert np.array_equal(xs[1], network_inputs(example)[1]) and not np.array_equal(xs[0].ravel(), xs[1].ravel()[:8])
    # a one-input network's input is the one the benchmark always drew
    (x,) = network_inputs(example[:1])
    assert np.array_equal(x, np.random.default_rng(1).uniform(-1.0, 1.0, (1, 1, 8)).astype("float32"))
    want = [np.zeros(3), np.ones(2)]
    assert max_error((torch.tensor([0.0, 0.5, 0.0]), torch.tensor([1.0, 1.25])), want) == 0.5
    assert [o.shape for o in as_outputs(np.zeros(4))] == [(4,)]
    with pytest.raises(ValueError, match="1 outputs where PyTorch has 2"):
        max_error(np.zeros(3), want)
    assert onnx_input_names(1) == ["x"] and onnx_input_names(3) == ["x", "x1", "x2"]


def test_streaming_rates_the_matmul_kernels_weights_against_the_copy_ceiling(tmp_path, monkeypatch):
    from workbench.engine.measure import memory
    from workbench.engine.models import zoo

    graph = zoo.load("llama_layer_decode", **TINY_DECODE)
    assert matmul_weight_bytes(graph, ["rms1", "dense1"]) == 64 * 64 * 4
    assert matmul_weight_bytes(graph, ["dense5", "dense6", "silu_mul1"]) == 2 * 64 * 96 * 4
    path = tmp_path / "kernels.csv"
    with path.open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=["kernel", "ms", "ops"])
        wr.writeheader()
        wr.writerows([{"kernel": "dense1", "ms": "0.002", "ops": "dense1"},
                      {"kernel": "rms1", "ms": "0.5", "ops": "rms1"},  # no weight streamed: left out
                      {"kernel": "dense5", "ms": "0.006", "ops": "dense5 dense6 silu_mul1"}])
    monkeypatch.setattr(memory, "stream_gbs", lambda target, elems: (10.0, 12.0))  # copy, triad
    got = weight_streaming(graph, path, {"kind": "llvm"}, {"ours_ms": 0.1, "best_engine_ms": None})
    weights = 64 * 64 * 4 + 2 * 64 * 96 * 4
    assert got["copy_gbs"] == 10.0 and got["weight_kernels_ms"] == pytest.approx(0.008)
    assert got["pct_of_bandwidth"] == pytest.approx(100 * weights / 0.008e-3 / 10e9)
    every = sum(t.size * 4 for t in graph.tensors.values() if t.role == "const")
    assert got["ours_step_pct_of_bandwidth"] == pytest.approx(100 * every / 0.1e-3 / 10e9)
    assert got["best_engine_step_pct_of_bandwidth"] is None


def test_the_by_op_match_sees_the_fused_attention_as_one_compute_op(tmp_path):
    """The decode layer's ONNX form has nine matrix products, ours seven GMMs and one attention
    op: with the view, the scores' product heads the attention's segment, the context's joins it,
    and every ONNX node maps."""
    from workbench.bench.network_contenders import onnx_export
    from workbench.bench.networks import fused_attention_view
    from workbench.engine.measure.byop import match_ops
    from workbench.engine.measure.engines import onnx_nodes
    from workbench.engine.models import networks, zoo

    module, example = networks.llama_layer_decode(**TINY_DECODE)
    onnx_export(module, network_inputs(example), tmp_path / "m.onnx")
    nodes = onnx_nodes(tmp_path / "m.onnx")
    ours = [(n.name, n.type) for n in zoo.load("llama_layer_decode", **TINY_DECODE).nodes]
    assert match_ops(nodes, ours).unmapped  # as they are, the compute ops do not pair up
    ours_view, view = fused_attention_view(ours, nodes)
    match = match_ops(view, ours_view)
    assert not match.unmapped
    by_type = [(n.op_type, match.onnx_to_ours[n.name]) for n in view if n.op_type.startswith("MatMul")]
    assert by_type == [("MatMul", "dense1"), ("MatMul", "dense2"), ("MatMul", "dense3"), ("MatMul", "attention1"),
                       ("MatMul (attention context)", "attention1"), ("MatMul", "dense4"), ("MatMul", "dense5"),
                       ("MatMul", "dense6"), ("MatMul", "dense7")]
    assert fused_attention_view(ours[:3], nodes) == (ours[:3], nodes)  # no attention op: as they were


@pytest.mark.tuning
@pytest.mark.slow  # 2-5 minutes on 2 shared cores: a tuning, torch.compile and OpenVINO's compile
def test_the_network_benchmark_runs_a_decode_step_with_its_cache_through_every_contender(tmp_path):
    """A tiny Llama decode step (hidden 64, 4 query heads in 2 groups, a cache of 6): every
    contender's outputs (hidden state, K and V) against PyTorch's, the best engine named and the
    weight streaming rated. TVM's MetaSchedule pipeline is left out, as in the BERT layer's test:
    its builds take minutes even at two trials per task; the benchmark runs it."""
    from workbench.bench.networks import ENGINES, run_network_bench

    contenders = ("ours", "torch", "torch_compile", "openvino", "onnxruntime", "tvm_untuned")
    (row,) = run_network_bench(("llama_layer_decode",), 12, tmp_path, {"kind": "llvm", "num-cores": 2},
                               options={"llama_layer_decode": TINY_DECODE}, rounds=2, contenders=contenders)
    assert not [k for k in row if k.endswith("_error")], row
    assert all(row[f"{k}_ms"] > 0 for k in contenders)
    scale = max(1.0, row["reference_max_abs"])
    assert row["max_abs_err"] < 1e-4 * scale
    assert all(row[f"{k}_err"] < 1e-3 * scale for k in ("torch_compile", "openvino", "onnxruntime", "tvm_untuned"))
    assert row["best_engine_ms"] == min(row[f"{k}_ms"] for k in ENGINES)
    assert 0 < row["pct_of_bandwidth"] and 0 < row["ours_step_pct_of_bandwidth"] and row["copy_gbs"] > 0
    assert row["weight_mb"] == pytest.approx(4 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 96) / 2**20)
    with (tmp_path / "llama_layer_decode_kernels.csv").open() as f:
        kernels = list(csv.DictReader(f))
    assert any("dense5" in k["ops"] for k in kernels)
    assert (tmp_path / "networks.md").read_text().count("| llama_layer_decode | 12 |") == 1
    with (tmp_path / "llama_layer_decode_by_op.csv").open() as f:  # ours beside the engines, op by op
        by_op = {r["op"]: r for r in csv.DictReader(f)}
    assert set(by_op) == {*(f"dense{i}" for i in range(1, 8)), "attention1", "unmapped"}
    assert by_op["attention1"]["type"] == "matmul (attention)" and float(by_op["attention1"]["onnxruntime_ms"]) > 0
