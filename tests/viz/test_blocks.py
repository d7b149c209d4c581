"""Repeated blocks: found on real networks' drawn graphs, collapsed into one node each, the
graph still a DAG with every edge between groups; nothing on a graph without repetition."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest

from tests.viz.test_graph import residual_chain
from workbench.engine.models import zoo
from workbench.engine.layout.book import LayoutBook
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.propagate import plan_layouts
from workbench.viz.blocks import collapse_blocks, find_blocks
from workbench.viz.graph import display_graph, graph_figure


@pytest.fixture(scope="module")
def states():
    """The app's state of each network (a fresh session, replayed): what the Graph page draws."""
    from workbench.engine.session.session import new_session, replay

    return {m: replay(new_session(m)) for m in ("resnet18", "mobilenet_v2")}


def _drawn(states, model: str) -> nx.DiGraph:
    s = states[model]
    return display_graph(s.graph, s.program.plan)


def _types(d: nx.DiGraph, ops) -> Counter:
    return Counter(d.nodes[n]["sub"] or d.nodes[n]["kind"] for n in ops)


def _owner(blocks) -> dict[str, str]:
    return {op: b.name for b in blocks for op in b.ops}


def _same_op(x: dict, y: dict) -> bool:
    return (x["sub"], x["kind"]) == (y["sub"], y["kind"])


def _isomorphic(d: nx.DiGraph, a, b) -> bool:
    return nx.is_isomorphic(d.subgraph(a), d.subgraph(b), node_match=_same_op)


#: model -> its residual adds, the fewest occurrences of repeated blocks it must show, and the op
#: types each of its blocks holds (a basic block's residual add; an inverted residual's convs)
NETWORKS = [("resnet18", 8, 6, {"C2D", "add"}), ("mobilenet_v2", 10, 10, {"C2D", "DEP"})]


@pytest.mark.parametrize("model, adds, least, holds", NETWORKS)
def test_the_residual_blocks_are_found_in_groups_of_equal_structure(states, model, adds, least, holds):
    d = _drawn(states, model)
    blocks = find_blocks(d)
    assert len(blocks) >= least
    assert all(holds <= set(_types(d, b.ops)) for b in blocks)
    owner = _owner(blocks)
    # a block never splits a fused kernel (an add and the relu fused after it stay together)
    kernels = [k.ops for k in states[model].program.plan.kernels]
    assert all(len({owner.get(op) for op in ops}) == 1 for ops in kernels)
    assert len(owner) == sum(len(b.ops) for b in blocks)  # no op in two blocks
    assert all(d.nodes[op]["kind"] not in ("input", "output") for op in owner)
    # every residual add sits in a block
    assert len([n for n in owner if d.nodes[n]["sub"] == "add"]) == adds
    groups: dict[str, list] = {}
    for b in blocks:
        groups.setdefault(b.structure, []).append(b)
    for group in groups.values():
        assert len(group) >= 2 and [b.index for b in group] == list(range(1, len(group) + 1))
        assert all(b.count == len(group) and len(b.ops) >= 2 for b in group)
        assert all(_isomorphic(d, group[0].ops, b.ops) for b in group[1:])  # the same ops, wired the same way
        # the summary counts every op of the block
        counts = [int(part.split(" ×")[1]) if " ×" in part else 1 for part in group[0].summary.split(", ")]
        assert sum(counts) == len(group[0].ops)
    # grouped by structure only: the same block on tensors of different shapes (one stage to the next)
    outputs = {d.edges[next(iter(d.out_edges(b.ops[-1])))]["shape"] for b in max(groups.values(), key=len)}
    assert len(outputs) > 1


@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v2"])
def test_blocks_do_not_depend_on_the_order_nodes_were_added_in(states, model):
    d = _drawn(states, model)
    shuffled = nx.DiGraph()
    shuffled.add_nodes_from(reversed(list(d.nodes(data=True))))
    shuffled.add_edges_from(reversed(list(d.edges(data=True))))
    found = find_blocks(d)
    assert found == find_blocks(d)
    assert {b.name: set(b.ops) for b in find_blocks(shuffled)} == {b.name: set(b.ops) for b in found}


@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v2"])
def test_collapsed_blocks_leave_a_smaller_dag_with_every_edge_between_groups(states, model):
    d = _drawn(states, model)
    blocks = find_blocks(d)
    c = collapse_blocks(d, blocks)
    owner = _owner(blocks)
    ops = len(states[model].graph.nodes)
    assert len(c) < 0.4 * ops
    assert nx.is_directed_acyclic_graph(c)
    assert set(c.nodes) == {owner.get(n, n) for n in d.nodes}
    wanted = {(owner.get(a, a), owner.get(b, b)) for a, b in d.edges if owner.get(a, a) != owner.get(b, b)}
    assert set(c.edges) == wanted
    for b in blocks:
        node = c.nodes[b.name]
        assert node["kind"] == "block" and node["members"] == b.ops
        assert f"{b.index} of {b.count}" in node["label"] and all(op in node["hover"] for op in b.ops)


def test_an_expanded_block_keeps_its_ops_and_the_others_stay_collapsed(states):
    d = _drawn(states, "resnet18")
    blocks = find_blocks(d)
    opened = blocks[1]
    c = collapse_blocks(d, blocks, keep={opened.name})
    assert opened.name not in c and set(opened.ops) <= set(c.nodes)
    assert {b.name for b in blocks if b is not opened} <= set(c.nodes)
    assert nx.is_directed_acyclic_graph(c)


def test_a_residual_chain_is_one_block_per_residual_block():
    g = residual_chain(60)  # 12 blocks of conv, relu, conv, add, relu
    d = display_graph(g, plan_layouts(g, LayoutBook()))
    blocks = find_blocks(d)
    assert [set(b.ops) for b in blocks] == [{f"c{i}a", f"r{i}a", f"c{i}b", f"add{i}", f"r{i}b"} for i in range(12)]
    assert {b.structure for b in blocks} == {"A"} and blocks[-1].name == "block A12"


@pytest.mark.parametrize("model", sorted(zoo.MODELS))
def test_a_small_graph_without_repetition_collapses_nothing(model):
    g = zoo.load(model)
    d = display_graph(g, plan_layouts(g, LayoutBook()))
    assert find_blocks(d) == []
    assert collapse_blocks(d, []) is d


def test_an_empty_graph_has_no_blocks():
    g = GraphBuilder("empty").build()
    assert find_blocks(display_graph(g, plan_layouts(g, LayoutBook()))) == []


def test_the_figure_draws_collapsed_blocks_and_expands_one_on_demand(states):
    s = states["resnet18"]
    g, plan = s.graph, s.program.plan

    def drawn(**kw) -> set[str]:
        fig = graph_figure(g, plan, **kw)
        return {n for tr in fig.data if tr.mode == "markers" and tr.customdata is not None for n in tr.customdata}

    full = drawn()
    blocks = find_blocks(display_graph(g, plan))
    shut = drawn(collapse_blocks=True)
    assert {b.name for b in blocks} <= shut and len(shut) < 0.4 * len(full)
    assert not shut & set(_owner(blocks))  # no op of a collapsed block is drawn
    opened = drawn(collapse_blocks=True, expanded={blocks[0].name})
    assert blocks[0].name not in opened and set(blocks[0].ops) <= opened
    # with kernels collapsed too, an expanded block shows its fused kernels
    kernels = {f"kernel {k.name}" for k in plan.kernels if len(k.ops) > 1 and set(k.ops) & set(blocks[0].ops)}
    both = drawn(collapse_blocks=True, collapse=True, expanded={blocks[0].name})
    assert kernels and kernels <= both and blocks[1].name in both
