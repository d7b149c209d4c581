"""How near a decode step's weight streaming comes to the machine's memory bandwidth.

A decode step multiplies one token by every weight matrix: each weight is read once per token,
so its matrix-vector kernels are bound by memory, not FLOPs. ``pct_of_bandwidth`` is their
weight bytes / their time / the STREAM copy ceiling measured in the same run
(``memory.stream_gbs`` over arrays past the last-level cache, not the ceilings' cached figure of
an earlier hour), in percent; the ``*_step_pct_of_bandwidth`` figures rate a whole step (every
weight of the layer over the network's median) the same way, ours beside the best engine."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from workbench.engine.ir.graph import Graph

__all__ = ["STREAMING", "matmul_weight_bytes", "weight_streaming"]

#: the built-in networks whose matmuls are matrix-vector products (one token)
STREAMING = ("llama_layer_decode",)


def _bytes(graph: Graph, tensor: str) -> int:
    t = graph.tensors[tensor]
    return t.size * np.dtype(t.dtype).itemsize


def matmul_weight_bytes(graph: Graph, ops: list[str]) -> int:
    """The bytes of the constant operands (the weights) of the matmuls among ``ops``."""
    nodes = {n.name: n for n in graph.nodes}
    return sum(_bytes(graph, t) for op in ops if op in nodes and nodes[op].type == "matmul"
               for t in nodes[op].inputs if graph.tensors[t].role == "const")


def _pct(nbytes: int, ms: float | None, copy_gbs: float) -> float | None:
    return 100.0 * nbytes / (ms * 1e6) / copy_gbs if ms and nbytes else None


def weight_streaming(graph: Graph, kernels_csv: Path, target: Mapping, row: Mapping[str, Any]) -> dict[str, Any]:
    """The streaming figures of a benchmark row: ``kernels_csv`` is ours kernel by kernel
    (``networks.write_kernel_times``), ``row`` has the contenders' medians (``ours_ms``,
    ``best_engine_ms``). The copy ceiling is measured now, beside the rows it rates."""
    from workbench.engine.measure.memory import cache_info, stream_bytes, stream_gbs

    with Path(kernels_csv).open() as f:
        kernels = list(csv.DictReader(f))
    streamed = [(matmul_weight_bytes(graph, k["ops"].split()), float(k["ms"])) for k in kernels]
    streamed = [(b, ms) for b, ms in streamed if b]
    nbytes, ms = sum(b for b, _ in streamed), sum(ms for _, ms in streamed)
    copy_gbs = stream_gbs(target, stream_bytes(cache_info()[0]) // 4)[0]
    every = sum(_bytes(graph, t) for t, v in graph.tensors.items() if v.role == "const")
    return {"copy_gbs": copy_gbs, "weight_mb": nbytes / 2**20, "weight_kernels_ms": ms,
            "pct_of_bandwidth": _pct(nbytes, ms, copy_gbs),
            "ours_step_pct_of_bandwidth": _pct(every, row.get("ours_ms"), copy_gbs),
            "best_engine_step_pct_of_bandwidth": _pct(every, row.get("best_engine_ms"), copy_gbs)}
