"""Figure builders: engine data in, the expected traces and labels out."""

from __future__ import annotations

import pytest

from workbench.engine import zoo
from workbench.engine.ceilings import Ceilings, Yardstick
from workbench.engine.book import LayoutBook
from workbench.engine.keys import apply_actions, apply_layout
from workbench.engine.presets import preset_actions
from workbench.engine.propagate import plan_layouts
from workbench.viz.graph import display_graph, graph_figure
from workbench.viz.kernels import latency_bars_figure
from workbench.viz.roofline import roofline_figure
from workbench.viz.tuning import best_so_far, candidate_scores, candidates_figure, progress_figure, tuning_curves_figure


def _labels(fig) -> list[str]:
    return [a.text for a in fig.layout.annotations if a.text]


@pytest.mark.parametrize("model", sorted(zoo.MODELS))
def test_every_op_and_non_constant_tensor_is_drawn(model):
    g = zoo.load(model)
    plan = plan_layouts(g, LayoutBook())
    d = display_graph(g, plan)
    assert {n.name for n in g.nodes} <= set(d.nodes)
    drawn = {e["tensor"] for _, _, e in d.edges(data=True)}
    assert drawn == {t for t, ten in g.tensors.items() if ten.role != "const"}
    fig = graph_figure(g, plan)
    names = {n for tr in fig.data if tr.customdata is not None for n in tr.customdata}
    assert {n.name for n in g.nodes} <= names


def test_a_conversion_between_two_convs_is_a_node_on_that_edge():
    g = zoo.load("r18_block")
    book = apply_layout(g, LayoutBook(), "relu1", "split", {"dim": 1, "factors": [4, 16]})
    book = apply_layout(g, book, "relu1@conv2", "reorder", {"perm": [0, 2, 3, 1]})
    plan = plan_layouts(g, book)
    d = display_graph(g, plan)
    convs = [n for n, a in d.nodes(data=True) if a["kind"] in ("conversion", "fused conversion")]
    assert len(convs) == len(plan.conversions) >= 1
    into_conv2 = [a for a, b in d.in_edges("conv2")]
    # relu1 (a simple op) writes conv2's layout itself: the conversion is drawn as a fused one
    assert [d.nodes[a]["kind"] for a in into_conv2 if "convert" in a] == ["fused conversion"]
    fig = graph_figure(g, plan)  # a large graph: edge labels are hover text on the edges' midpoints
    edge_hover = [h for tr in fig.data if tr.hovertext is not None and tr.customdata is None for h in tr.hovertext]
    assert any("relu1" in h and "C.o" in h for h in edge_hover)
    assert any("relu1" in lab for lab in _labels(graph_figure(g, plan, changed={"relu1"})))


def test_changed_tensors_are_highlighted_and_labels_show_layouts():
    g = zoo.load("r18_stem")
    book = apply_actions(g, LayoutBook(), preset_actions(g, "channels_last", "conv"))
    plan = plan_layouts(g, book)
    fig = graph_figure(g, plan, changed={"conv", "bias", "relu"}, selected="conv")
    hot = [tr for tr in fig.data if tr.name == "took the new layout"]
    # conv->bias, bias->relu, relu->its conversion back to NCHW, conversion->output: two points each
    assert hot and len([x for x in hot[0].x if x is not None]) == 2 * 4
    assert any("[N H W C]" in lab for lab in _labels(fig))
    complex_trace = next(tr for tr in fig.data if tr.name == "complex")
    assert list(complex_trace.marker.line.width) == [4]  # the selected conv is outlined


def test_best_so_far_and_curves():
    rows = [{"task": "a", "stage": "joint", "layout": "L1", "latency_ms": 5.0},
            {"task": "a", "stage": "joint", "layout": "L1", "latency_ms": None, "error": "boom"},
            {"task": "a", "stage": "joint", "layout": "L2", "latency_ms": 3.0},
            {"task": "a", "stage": "loop", "layout": "L2", "latency_ms": 4.0},
            {"task": "b", "stage": "loop", "layout": None, "latency_ms": 1.0}]
    assert best_so_far(rows) == [5.0, 5.0, 3.0, 3.0, 1.0]
    fig = progress_figure(rows)
    best = {tr.name: list(tr.y) for tr in fig.data if tr.name.endswith(": best")}
    assert best == {"a: best": [5.0, 5.0, 3.0, 3.0], "b: best": [1.0]}
    assert fig.layout.yaxis.type == "log"
    scores = candidate_scores(rows)
    assert [(c["layout"], c["score_ms"], c["measurements"], c["errors"]) for c in scores] == [
        ("L1", 5.0, 2, 1), ("L2", 3.0, 1, 0)]
    bars = candidates_figure(rows).data[0]
    assert list(bars.x) == ["L1", "L2"] and list(bars.y) == [5.0, 3.0]
    two = tuning_curves_figure({"metaschedule": rows[:2], "joint": rows[2:4]})
    assert {tr.legendgroup for tr in two.data} == {"metaschedule", "joint"}


def test_latency_bars_group_variants_by_kernel():
    fig = latency_bars_figure({"v1": {"pad": 1.0, "conv": 9.0}, "v2": {"pad": 1.5, "conv": 4.0}})
    assert [tr.name for tr in fig.data] == ["v1", "v2"]
    assert list(fig.data[1].y) == [1.5, 4.0] and fig.layout.barmode == "group"


def test_roofline_labels_the_library_gemms_as_reference_points():
    yards = (Yardstick("NumPy", 2048, 80.0, 2), Yardstick("PyTorch", 2048, 169.0, 2))
    c = Ceilings("cpu", {"kind": "llvm"}, peak_gflops=100.0, copy_gbs=10.0, triad_gbs=12.0, caches={"L1d": 32768},
                 line_bytes=64, library=yards)
    fig = roofline_figure([], c)
    refs = [t for t in fig.data if t.legendgroup == "library"]
    assert [t.name for t in refs] == ["NumPy GEMM 2048 (library)", "PyTorch GEMM 2048 (library)"]
    assert [t.text[0] for t in refs] == ["NumPy GEMM 2048", "PyTorch GEMM 2048"] and refs[1].mode == "markers+text"
    assert refs[1].x[0] == pytest.approx(2048 / 6) and refs[1].y[0] == 169.0
    assert 10 ** fig.layout.yaxis.range[1] > 169.0  # a library above the measured roof stays in view
    plain = roofline_figure([], Ceilings(**{**c.to_json(), "library": ()}))
    assert not [t for t in plain.data if t.legendgroup == "library"]
