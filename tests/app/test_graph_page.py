"""The Graph page: it opens on the model's tensors (a network's repeated blocks collapsed), the op a
search finds is the selected op at once, and the whole graph fits the chart (Plotly's own zoom-out
would shrink the drawing under text that keeps its size)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import graph_labels, home, session, start
from workbench.viz.graph import VIEW_MAX


def _panel(app: AppTest) -> list[str]:
    """The op the side panel shows (its heading), if any."""
    return [m.value.split("\n")[0].removeprefix("#### ") for m in app.markdown if m.value.startswith("#### ")]


def _hint(app: AppTest) -> bool:
    return any(c.value.startswith("Click an op (or find one) to see") for c in app.caption)


def _chart(app: AppTest) -> tuple[dict, dict]:
    """The graph chart's figure and Plotly config."""
    chart = app.get("plotly_chart")[0].proto
    return json.loads(chart.spec), json.loads(chart.config)


def test_a_search_selects_its_match_at_once(at):
    """The match a search shows is the selected op in the same run: the side panel shows it and
    the other pages get it; a match picked from the list too; a click on another op stands until
    the search changes."""
    home(at).selectbox(key="model_pick").set_value("r18_block").run()
    assert _hint(at) and _panel(at) == []
    at.text_input(key="graph_search").input("conv").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="graph_match").value == "conv1"
    assert at.session_state["selected"] == "conv1" and _panel(at) == ["conv1"] and not _hint(at)
    at.selectbox(key="graph_match").set_value("conv2").run()
    assert _panel(at) == ["conv2"]
    at.session_state["selected"] = "relu1"  # what a click on relu1 does (the chart's on_select)
    at.run()
    assert _panel(at) == ["relu1"]
    at.text_input(key="graph_search").input("relu2").run()
    assert at.session_state["selected"] == "relu2" and _panel(at) == ["relu2"]
    at.switch_page("../pages/layouts.py").run()
    assert at.selectbox(key="layout_key").value == "relu2"


@pytest.mark.slow
def test_the_whole_graph_fits_the_chart_and_a_double_click_comes_back(at):
    """MobileNet-V2 (153 ops): the toggle fits every op into one chart with the labels that have
    room; Plotly's autoscale and zoom-out are gone, and a double-click resets to the figure's view."""
    _, config = _chart(at)
    assert config["doubleClick"] == "reset" and {"autoScale2d", "zoomOut2d"} <= set(config["modeBarButtonsToRemove"])
    home(at).selectbox(key="model_pick").set_value("mobilenet_v2").run()
    at.toggle(key="graph_blocks:mobilenet_v2").set_value(False).run()  # every op drawn
    fit = at.toggle(key="graph_fit")
    assert not fit.value

    def in_view(fig: dict) -> bool:
        (x0, x1), (y0, y1) = fig["layout"]["xaxis"]["range"], fig["layout"]["yaxis"]["range"]
        return all(x0 < x < x1 and y0 < y < y1 for tr in fig["data"] if tr.get("mode") == "lines"
                   for x, y in zip(tr["x"], tr["y"]) if x is not None)

    opened, _ = _chart(at)
    assert not in_view(opened)  # too tall: it opens on a window at full size
    fit.set_value(True).run()
    assert not at.exception, at.exception
    fitted, config = _chart(at)
    lay = fitted["layout"]
    assert in_view(fitted) and lay["height"] - lay["margin"]["t"] <= VIEW_MAX  # the plot, under the legend
    assert config["doubleClick"] == "reset"
    def texts(fig: dict) -> int:  # the op names and edge labels drawn
        return len(fig["layout"].get("annotations", [])) + sum(len(tr["text"]) for tr in fig["data"]
                                                                 if tr.get("mode") == "text")

    assert 50 < texts(fitted) < texts(opened) / 2  # those that have room at a fifteenth of full size
    ops = {n.name for n in at.session_state["state"].graph.nodes}
    assert ops <= {n for tr in fitted["data"] if tr.get("mode") == "markers" for n in tr.get("customdata") or []}


@pytest.mark.slow
def test_the_network_is_timed_behind_a_button_and_kept_for_its_session(at):
    """"Time the network" checks and times the session's network: its latency, its kernels as a
    timeline, by op type and against the frameworks; kept in the workspace while the session
    stays (a reload shows it again), marked as of another state once it changes, put away with
    another model."""
    home(at).selectbox(key="model_pick").set_value("c1d").run()
    assert [c for c in at.get("plotly_chart") if c.proto.id.endswith("network_timeline")] == []
    at.button(key="time_network").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    kept = at.session_state["network_time"]
    plan = at.session_state["state"].program.plan
    assert kept["session"] == at.session_state["state"].session.key()
    assert [k["kernel"] for k in kept["result"]["kernels"]] == [k.name for k in plan.kernels]
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text") for c in at.get("plotly_chart")]
    assert {"Kernels in the network, in call order", "Time by op type", "The network beside the frameworks"} <= set(titles)
    latency = f"{kept['result']['contenders'][0]['stats']['median_ms']:.3f} ms"
    assert _network_metric(at) == [latency]
    again = start({"ws": at.query_params["ws"]})  # a reload: the workspace file's copy
    assert not again.exception and not again.error, [e.value for e in again.error]
    assert _network_metric(again) == [latency]
    assert [c for c in again.get("plotly_chart") if c.proto.id.endswith("network_timeline")]
    again.session_state["state"] = again.session_state["state"].renamed("another")  # another revision
    again.run()
    assert _network_metric(again) == []
    assert any(c.value.startswith("The last timing was of another session state") for c in again.caption)
    home(again).selectbox(key="model_pick").set_value("r18_stem").run()  # another model: put away
    assert "network_time" not in again.session_state and _network_metric(again) == []


def _network_metric(app: AppTest) -> list[str]:
    return [m.value for m in app.metric if m.label == "The network (compiled)"]


def test_a_network_that_cannot_be_timed_says_why_in_one_line(at, monkeypatch):
    from workbench.engine.base.errors import BuildError
    from workbench.app import network_view as _network_time

    def refused(state, say):
        say("checking it against the reference")
        raise BuildError("the network's outputs differ from the reference by 1.0e-02 (relative): not timed")

    monkeypatch.setattr(_network_time, "time_network", refused)
    at.button(key="time_network").click().run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == ["timing the network: the network's outputs differ from the reference by "
                                           "1.0e-02 (relative): not timed"]
    assert "network_time" not in at.session_state


def test_graph_opens_on_r18_stem_with_its_tensors(at):
    labels = graph_labels(at)
    for tensor in ("pad 1x3x230x230", "conv 1x64x112x112", "relu 1x64x112x112"):
        assert tensor in labels
    assert "[N C H W]" in labels


def test_the_first_graph_run_sends_a_static_drawing_and_later_runs_do_not(at):
    def drawings():
        return [m.value for m in at.markdown if 'class="graph-preview"' in m.value]

    (svg,) = drawings()  # the fixture's tab has run the graph page once
    for op in ("pad", "conv", "bias", "relu"):
        assert f"<tspan font-weight=\"bold\">{op}</tspan>" in svg
    assert "display: none" in svg  # its CSS hides it once Plotly has drawn the chart
    at.run()
    assert not at.exception and drawings() == []
    assert at.get("plotly_chart")  # the chart itself is sent on every run


def _drawn_nodes(app: AppTest) -> set[str]:
    """The names of the nodes the graph figure draws (its click targets carry them)."""
    fig = json.loads(app.get("plotly_chart")[0].proto.spec)
    return {n for tr in fig["data"] if tr.get("mode") == "markers" for n in tr.get("customdata") or [] if n}


@pytest.mark.slow
def test_resnet18_opens_with_its_repeated_blocks_collapsed_and_they_expand(at):
    """A small model draws every op (the toggle off); ResNet-18 (70 ops) opens with its basic
    blocks collapsed, one is expanded from the toolbar, and the toggle draws every op again."""
    (small,) = [t for t in at.toggle if t.label == "Collapse repeated blocks"]
    assert not small.value and small.disabled  # r18_stem repeats nothing
    home(at).selectbox(key="model_pick").set_value("resnet18").run()
    assert not at.exception, at.exception
    (toggle,) = [t for t in at.toggle if t.label == "Collapse repeated blocks"]
    assert toggle.value and not toggle.disabled
    collapsed = _drawn_nodes(at)
    blocks = sorted(n for n in collapsed if n.startswith("block "))
    assert len(blocks) >= 6 and "conv4" not in collapsed
    (opened,) = [m for m in at.multiselect if m.label == "Expanded blocks"]
    opened.set_value([blocks[0]]).run()
    some = _drawn_nodes(at)
    assert blocks[0] not in some and set(blocks[1:]) <= some and len(some) > len(collapsed)
    toggle.set_value(False).run()
    everything = _drawn_nodes(at)
    ops = {n.name for n in at.session_state["state"].graph.nodes}
    assert ops <= everything and not any(n.startswith("block ") for n in everything)
    assert len(collapsed) < 0.4 * len(ops)
