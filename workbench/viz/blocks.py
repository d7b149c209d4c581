"""Repeated blocks of a drawn graph (ResNet's basic blocks, MobileNet-V2's inverted residuals),
and the contraction that draws a group of nodes as one node.

A block is found without knowing the network: the op DAG is cut where a single tensor carries
everything from one side to the other (the tensor between two residual blocks), but never inside
a fused kernel, so an add and the ReLU fused after it stay with their block. A piece with a skip
connection is a block of its own; consecutive chain pieces form one segment (a block without a
skip, e.g. MobileNet-V2's first block of each stage). Segments of two or more ops whose
structure (op types, the edges between them and those entering them; not the shapes) occurs
twice or more are the repeated blocks; each occurrence collapses into a node of its own, so the
graph stays a DAG.

Works on ``display_graph``'s networkx graph (node attributes kind, label, sub, group, hover).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Collection, Mapping
from typing import NamedTuple

import networkx as nx

__all__ = ["MANY_OPS", "Block", "collapse_blocks", "contract", "find_blocks"]

#: graphs with more ops than this open with their repeated blocks collapsed
MANY_OPS = 60
_ENDS = ("input", "output")  # graph inputs and outputs never belong to a block


class Block(NamedTuple):
    """One occurrence of a repeated structure: ``name`` is the node it collapses into."""

    name: str  # e.g. "block A3": the third occurrence of structure A
    structure: str  # the structure's letter, shared by all its occurrences
    index: int  # 1-based, in topological order
    count: int  # occurrences of the structure
    ops: tuple[str, ...]  # its nodes, in topological order
    summary: str  # its op types with their counts, e.g. "C2D ×2, bias_add ×2, relu ×2, add"


def contract(g: nx.DiGraph, into: Mapping[str, str], nodes: Mapping[str, dict]) -> nx.DiGraph:
    """``g`` with each node ``n`` in ``into`` replaced by the node ``into[n]`` (attributes
    ``nodes[into[n]]``), placed where its first member was. Edges inside a group disappear; the
    others are kept, one per pair of drawn nodes. ``g`` itself when ``into`` is empty."""
    if not into:
        return g
    out = nx.DiGraph()
    for n, d in g.nodes(data=True):
        m = into.get(n, n)
        if m not in out:
            out.add_node(m, **(nodes[m] if n in into else d))
    for a, b, d in g.edges(data=True):
        a2, b2 = into.get(a, a), into.get(b, b)
        if a2 != b2 and not out.has_edge(a2, b2):
            out.add_edge(a2, b2, **d)
    return out


def _op_type(d: dict) -> str:
    return d["sub"] or d["kind"]  # a conversion has no operator: its kind tells it apart


def _cuts(g: nx.DiGraph, order: list[str]) -> list[int]:
    """The positions ``k`` after which ``order`` may be cut: every edge across the gap leaves
    ``order[k]`` (one tensor crosses it), and none stays inside ``order[k]``'s fused kernel."""
    pos = {n: i for i, n in enumerate(order)}
    cuts, reach = [], 0  # reach: the furthest position an edge from before k lands on
    for k, n in enumerate(order[:-1]):
        group = g.nodes[n]["group"]
        if reach <= k and not (group and any(g.nodes[s]["group"] == group for s in g.successors(n))):
            cuts.append(k)
        reach = max([reach, *(pos[s] for s in g.successors(n))])
    return cuts


def _segments(g: nx.DiGraph) -> list[list[str]]:
    """The ops of ``g`` (inputs and outputs left out) in topological order, cut into pieces at
    ``_cuts``, with runs of consecutive chain pieces (no skip connection inside) merged."""
    ops = g.subgraph(n for n, d in g.nodes(data=True) if d["kind"] not in _ENDS).copy()  # views of views are slow
    order = list(nx.topological_sort(ops))
    if not order:
        return []
    bounds = [-1, *_cuts(ops, order), len(order) - 1]
    segments: list[list[str]] = []
    chain = False  # whether the last segment is a run of chain pieces
    for a, b in zip(bounds, bounds[1:]):
        # with the node before it: a skip connection starts there (the block's input is read twice)
        is_chain = nx.is_forest(ops.subgraph(order[max(a, 0):b + 1]).to_undirected(as_view=True))
        if is_chain and chain:
            segments[-1] += order[a + 1:b + 1]
        else:
            segments.append(order[a + 1:b + 1])
        chain = is_chain
    return segments


def _structure(g: nx.DiGraph, ops: list[str]) -> str:
    """A hash of the op types of ``ops``, the edges between them and those that enter them (from
    one node standing for the outside, so a skip connection counts): equal for two occurrences of
    one block whatever their shapes (Weisfeiler-Lehman, as many rounds as there are ops)."""
    outside = ("outside",)  # no op name: those are strings
    inside = set(ops)
    sub = nx.DiGraph(g.subgraph(ops).edges())
    sub.add_nodes_from(ops)
    sub.add_edges_from((outside, b) for a, b in g.in_edges(ops) if a not in inside)
    types = {n: _op_type(g.nodes[n]) for n in ops} | {outside: "outside"}
    nx.set_node_attributes(sub, types, "type")
    with warnings.catch_warnings():  # hashes are compared within one graph: a change across versions is harmless
        warnings.filterwarnings("ignore", "The hashes produced for directed graphs", UserWarning)
        return nx.weisfeiler_lehman_graph_hash(sub, node_attr="type", iterations=len(ops))


def _summary(g: nx.DiGraph, ops: list[str]) -> str:
    counts = Counter(_op_type(g.nodes[n]) for n in ops)  # in order of first appearance
    return ", ".join(t if c == 1 else f"{t} ×{c}" for t, c in counts.items())


def _letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"Z{i - 25}"


def find_blocks(g: nx.DiGraph) -> list[Block]:
    """The repeated blocks of ``g`` (a ``display_graph``), in topological order: every segment of
    two or more ops (see the module docstring) whose structure occurs at least twice. Structures
    are lettered in order of first occurrence; the result depends only on ``g``."""
    segments = [seg for seg in _segments(g) if len(seg) > 1]
    by_structure: dict[str, list[int]] = {}
    for i, seg in enumerate(segments):
        by_structure.setdefault(_structure(g, seg), []).append(i)
    repeated = [ids for ids in by_structure.values() if len(ids) > 1]
    blocks = [(i, Block(f"block {_letter(k)}{j}", _letter(k), j, len(ids), tuple(segments[i]),
                        _summary(g, segments[i]))) for k, ids in enumerate(repeated) for j, i in enumerate(ids, 1)]
    return [b for _, b in sorted(blocks)]


def collapse_blocks(g: nx.DiGraph, blocks: Collection[Block], keep: Collection[str] = ()) -> nx.DiGraph:
    """``g`` with each of ``blocks`` (from ``find_blocks(g)``), except those named in ``keep``,
    drawn as one node of kind "block" (its ops in ``members`` and in its hover text). A block is
    an interval of a topological order, hence convex: the result is still a DAG."""
    shut = [b for b in blocks if b.name not in keep]
    return contract(g, {op: b.name for b in shut for op in b.ops}, {b.name: _block_node(b) for b in shut})


def _block_node(b: Block) -> dict:
    hover = f"<b>{b.name}</b>: {b.index} of {b.count} blocks of this structure (click to expand)<br>"
    return {"kind": "block", "label": f"block {b.structure} · {b.index} of {b.count}", "sub": b.summary, "group": None,
            "hover": hover + "<br>".join(b.ops), "members": b.ops}
