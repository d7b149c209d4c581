"""Ours beside ONNX Runtime and OpenVINO, op by op: each engine's own per-node profile matched
to the ops of our graph, so a user sees which op loses the time.

The three graphs differ: ours is imported through TVM (ops named ``conv3``, ``dense2``), the
engines run the ONNX file after fusing and re-laying it out. Matching goes through the ONNX
graph: an engine node -> the ONNX node it stands for (``engine_to_onnx``), an ONNX node -> one
of our ops by *segment* (``match_ops``): the compute ops (convolutions and matrix products,
``ANCHOR_ONNX`` / ``ANCHOR_OURS``) are matched in graph order, the k-th to the k-th, and every
other op belongs to the compute op before it (the bias, activation, residual add, norm or pool
after a conv counts with that conv; ops before the first one with the first). When the graphs
hold different numbers of compute ops the segments cannot be trusted and nothing maps
(``OpMatch.unmapped`` says why). Pure: the functions take node lists and times, never run an engine.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ANCHOR_ONNX", "ANCHOR_OURS", "BY_OP_COLUMNS", "EngineProfile", "OnnxNode", "OpMatch", "match_ops", "ours_segments",
           "engine_to_onnx",
           "ort_node_times", "by_op_rows", "by_op_frame"]

#: ONNX op types that start a segment (a compute op)
ANCHOR_ONNX = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "FusedConv", "FusedMatMul", "FusedGemm"})
#: our op types that start a segment (their prefixes: conv2d, conv_transpose2d, matmul)
ANCHOR_OURS = ("conv", "matmul")
#: the by-op table's columns; ``*_ms`` is the segment's time in each engine
BY_OP_COLUMNS = ("op", "type", "ours_kernels", "onnx_nodes", "ours_ms", "onnxruntime_ms", "openvino_ms",
                 "ours_vs_onnxruntime", "ours_vs_openvino")


#: an engine's profile: (its node -> ms per run, its node -> the ONNX node it stands for)
EngineProfile = tuple[Mapping[str, float], Mapping[str, "str | None"]]


@dataclass(frozen=True)
class OnnxNode:
    """A node of an ONNX graph (or of an engine's optimized graph): name, op type, tensors."""

    name: str
    op_type: str
    outputs: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()


@dataclass
class OpMatch:
    """ONNX node -> our op (the segment's compute op); ``unmapped``: ONNX nodes that map to none,
    with the reason."""

    onnx_to_ours: dict[str, str] = field(default_factory=dict)
    unmapped: dict[str, str] = field(default_factory=dict)


def _is_anchor_ours(op_type: str) -> bool:
    return op_type.startswith(ANCHOR_OURS)


def _segments(anchors: Sequence[bool]) -> list[int]:
    """Each op's segment: the index of the last compute op at or before it (0 before the first)."""
    count, out = -1, []
    for is_anchor in anchors:
        count += is_anchor
        out.append(max(count, 0))
    return out


def match_ops(onnx_nodes: Sequence[OnnxNode], ours: Sequence[tuple[str, str]]) -> OpMatch:
    """Map each ONNX node (graph order) to our op (``(name, type)`` in graph order) heading its
    segment (module docstring)."""
    onnx_anchor = [n.op_type in ANCHOR_ONNX for n in onnx_nodes]
    ours_anchor = [_is_anchor_ours(t) for _, t in ours]
    heads = [name for (name, _), a in zip(ours, ours_anchor) if a]
    match = OpMatch()
    if sum(onnx_anchor) != len(heads) or not heads:
        why = (f"the ONNX graph has {sum(onnx_anchor)} convolutions and matrix products, ours {len(heads)}: "
               "segments cannot be matched")
        match.unmapped = {n.name: why for n in onnx_nodes}
        return match
    for n, seg in zip(onnx_nodes, _segments(onnx_anchor)):
        match.onnx_to_ours[n.name] = heads[seg]
    return match


def ours_segments(ours: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Our op -> the compute op heading its segment."""
    anchors = [_is_anchor_ours(t) for _, t in ours]
    heads = [name for (name, _), a in zip(ours, anchors) if a]
    if not heads:
        return {}
    return {name: heads[seg] for (name, _), seg in zip(ours, _segments(anchors))}


def engine_to_onnx(engine_nodes: Sequence[OnnxNode], onnx_nodes: Sequence[OnnxNode],
                   fused: Mapping[str, Sequence[str]] | None = None) -> dict[str, str | None]:
    """Each engine node (of its optimized graph) -> the ONNX node it stands for, the first of:
    the original layers it fused (``fused``: engine node -> original names, OpenVINO's
    ``originalLayersNames``; the first of them in graph order); its own name; the producer of one
    of its output tensors, or of the longest ONNX tensor name an output's name starts with (ONNX
    Runtime's ``X_nchwc``); the longest ONNX node name its name starts with
    (``/k/MatMul/MatMulAddFusion``); else, through the engine graph's data flow, the first node
    after it that maps, or the last before it (an inserted reshape or reorder). None: nothing maps."""
    order = {n.name: i for i, n in enumerate(onnx_nodes)}
    producer = {t: n.name for n in onnx_nodes for t in n.outputs}

    def prefixed(text: str, names: Iterable[str]) -> str | None:
        return max((k for k in names if text.startswith(k) and len(text) > len(k)), key=len, default=None)

    def own(e: OnnxNode) -> str | None:
        if names := [x for x in (fused or {}).get(e.name, ()) if x in order]:
            return min(names, key=order.__getitem__)
        if e.name in order:
            return e.name
        for t in e.outputs:
            if t in producer:
                return producer[t]
        for t in e.outputs:
            if (base := prefixed(t, producer)) is not None:
                return producer[base]
        return prefixed(e.name, order)

    got = {e.name: own(e) for e in engine_nodes}
    consumers: dict[str, list[str]] = {}
    made_by: dict[str, str] = {}
    for e in engine_nodes:
        made_by.update({t: e.name for t in e.outputs})
        for t in e.inputs:
            consumers.setdefault(t, []).append(e.name)
    by_name = {e.name: e for e in engine_nodes}

    def along(start: str, step: Callable[[OnnxNode], Iterable[str]]) -> str | None:
        seen, todo = {start}, [start]
        while todo:  # breadth first: the nearest node that maps
            nxt = []
            for name in todo:
                for other in step(by_name[name]):
                    if other in seen:
                        continue
                    if got.get(other):
                        return got[other]
                    seen.add(other)
                    nxt.append(other)
            todo = nxt
        return None

    return {e.name: got[e.name]
            or along(e.name, lambda n: [c for t in n.outputs for c in consumers.get(t, ())])
            or along(e.name, lambda n: [made_by[t] for t in n.inputs if t in made_by])
            for e in engine_nodes}


def ort_node_times(trace: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """ONNX Runtime's profile (``enable_profiling``'s JSON events) as node -> ms per run: each
    node's ``*_kernel_time`` events summed per ``model_run`` and the median over runs taken."""
    runs: list[dict[str, float]] = []
    current: dict[str, float] = {}
    events = sorted((e for e in trace if e.get("ph") == "X"), key=lambda e: e.get("ts", 0))
    for e in events:
        if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            node = e["name"].removesuffix("_kernel_time")
            current[node] = current.get(node, 0.0) + float(e["dur"]) / 1e3
        elif e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.append(current)
            current = {}
    if current and not runs:
        runs.append(current)
    nodes = {n for r in runs for n in r}
    return {n: statistics.median(r.get(n, 0.0) for r in runs) for n in nodes}


def by_op_rows(ours: Sequence[tuple[str, str]], kernel_rows: Sequence[Mapping[str, Any]],
               onnx_nodes: Sequence[OnnxNode], engines: Mapping[str, EngineProfile]
               ) -> tuple[list[dict], dict[str, list[str]]]:
    """One row per segment of our graph (``BY_OP_COLUMNS``), slowest of ours first: our kernels'
    ms (``kernel_rows``: ``write_kernel_times``' rows; a kernel counts in the segment of its first
    op) beside each engine's (``engines``: name -> (node -> ms, node -> ONNX node)); and what did
    not map, per engine (ONNX nodes of no segment, engine nodes of no ONNX node)."""
    segment_of = ours_segments(ours)
    match = match_ops(onnx_nodes, ours)
    heads = dict.fromkeys(segment_of.values())
    types = dict(ours)
    rows = {h: {"op": h, "type": types[h], "ours_kernels": [], "onnx_nodes": [], "ours_ms": 0.0} for h in heads}
    for k in kernel_rows:
        first = next((op for op in str(k.get("ops", "")).split() if op in segment_of), None)
        if first is not None:
            rows[segment_of[first]]["ours_kernels"].append(str(k["kernel"]))
            rows[segment_of[first]]["ours_ms"] += float(k["ms"])
    for n in onnx_nodes:
        if (h := match.onnx_to_ours.get(n.name)) is not None:
            rows[h]["onnx_nodes"].append(n.name)
    unmapped: dict[str, list[str]] = {"onnx": sorted(match.unmapped)}
    for engine, (times, to_onnx) in engines.items():
        for r in rows.values():
            r[f"{engine}_ms"] = 0.0
        lost = []
        for node, ms in times.items():
            h = match.onnx_to_ours.get(to_onnx.get(node) or "")
            if h is None:
                lost.append(node)
                continue
            rows[h][f"{engine}_ms"] += ms
        unmapped[engine] = sorted(lost)
    out = []
    for r in rows.values():
        r["ours_kernels"], r["onnx_nodes"] = " ".join(r["ours_kernels"]), " ".join(r["onnx_nodes"])
        for engine in engines:
            r[f"ours_vs_{engine}"] = r[f"{engine}_ms"] / r["ours_ms"] if r["ours_ms"] and r[f"{engine}_ms"] else None
        out.append(r)
    return sorted(out, key=lambda r: -r["ours_ms"]), unmapped


def by_op_frame(source: str | Path | Sequence[Mapping[str, Any]]) -> "pd.DataFrame":
    """The by-op table (``by_op_rows``' rows, or a networks run's ``NAME_by_op.csv``) as a pandas
    DataFrame in ``BY_OP_COLUMNS``, slowest of ours first: the Profile page's "ours vs engine, by op"."""
    import pandas as pd

    frame = pd.read_csv(source) if isinstance(source, (str, Path)) else pd.DataFrame(list(source))
    return frame.reindex(columns=list(BY_OP_COLUMNS)).sort_values("ours_ms", ascending=False, ignore_index=True)
