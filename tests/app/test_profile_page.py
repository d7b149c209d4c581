"""The Profile page (#45 items 3 and 9): variants by their short names in the figures' legends
(below the plots) with the whole action chain on hover and in a table, the roofline table's key
columns first; the tab's tuning runs side by side and a run's layout candidates as parallel
coordinates."""

from __future__ import annotations

import json
import os

from workbench.engine.measure.roofline import RooflinePoint

#: a variant's action chain, past a hundred characters (the issue's legends held such names)
CHAIN = ("conv: split, split, reorder, fuse · data@conv: unfold, pad · conv: parallel, vectorize, unroll · "
         "relu: fuse, parallel, vectorize")
KERNELS = {"pad": (0, 10**6), "conv": (2 * 10**8, 4 * 10**6), "pool": (10**6, 2 * 10**6)}


def _measured(at, labels: dict[str, str]) -> None:
    """Variants as the tab keeps them (label -> action chain), each timing every kernel."""
    at.session_state["variants"] = [{"variant": v, "action chain": chain, "total_ms": 3.0, "matches_reference": True}
                                    for v, chain in labels.items()]
    at.session_state["timings"] = {v: {k: 1.0 + i for k in KERNELS} for i, v in enumerate(labels)}
    at.session_state["points"] = [RooflinePoint(k, v, flops, nbytes, 1.0 + i)
                                  for i, v in enumerate(labels) for k, (flops, nbytes) in KERNELS.items()]


def _charts(at) -> dict[str, dict]:
    return {c.key: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def test_profile_names_variants_short_and_keeps_their_chains_for_hover_and_a_table(at):
    old = f"v1: {CHAIN[:70]}"  # a variant measured before short names
    _measured(at, {old: CHAIN[:70], "v2": CHAIN})
    at.switch_page("../pages/profile.py").run()
    assert not at.exception, at.exception
    charts = _charts(at)
    roof, bars = charts["roofline"], charts["latency_bars"]
    entries = [t["name"] for t in roof["data"][3:] if t.get("showlegend") is not False
               and t.get("legendgroup") != "library"]
    assert entries == ["v1", "v2"]
    legend = roof["layout"]["legend"]  # under the plot, across it: the plot keeps the figure's width
    assert (legend["orientation"], legend["yref"], legend["yanchor"]) == ("h", "container", "bottom")
    hovers = {t["name"]: t["hovertemplate"].replace("<br>", " ") for t in roof["data"] if t.get("showlegend") is False
              and t.get("legendgroup") != "library"}
    assert set(hovers) == {"conv · v1", "pool · v1", "conv · v2", "pool · v2"}  # pad has no FLOPs
    assert CHAIN in hovers["conv · v2"] and CHAIN[:70] in hovers["conv · v1"]
    assert [t["name"] for t in bars["data"]] == ["v1", "v2"] and CHAIN in bars["data"][1]["hovertemplate"].replace(
        "<br>", " ")
    tables = [d.value for d in at.get("dataframe")]
    roofs = next(t for t in tables if "% of roof" in t.columns)
    assert list(roofs.columns[:5]) == ["kernel", "variant", "latency ms", "GFLOP/s", "% of roof"]
    assert set(roofs["variant"]) == {"v1", "v2"} and len(roofs) == 6
    chains = next(t for t in tables if "action chain" in t.columns)
    assert chains.to_dict("list")["variant"] == ["v1", "v2"] and chains["action chain"].tolist() == [CHAIN[:70], CHAIN]


def _run(folder, rows: list[dict], mtime: float) -> None:
    folder.mkdir(parents=True)
    path = folder / "progress.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(path, (mtime, mtime))


def test_profile_shows_two_tuning_runs_side_by_side_and_layout_parameters_against_latency(at):
    from workbench.app import state as _state

    runs = _state.WORK_DIR / "tune" / at.session_state["wid"]
    joint = [{"task": "conv", "stage": "joint", "layout": lay, "latency_ms": ms} for lay, ms in (
        ("default", 0.9), ("alt_tiled(tiles=[1, 16], ot=32, it=3)", 0.6),
        ("alt_tiled(tiles=[4, 14], ot=16, it=4)", 1.2))]
    joint += [{"task": "conv", "stage": "loop", "layout": "alt_tiled(tiles=[1, 16], ot=32, it=3)", "latency_ms": 0.5}]
    _run(runs / "r18_stem-joint-0123456789abcdef", joint, 1_800_000_000)
    _run(runs / "r18_stem-loop-fedcba9876543210", [{"task": "conv", "stage": "loop", "latency_ms": ms}
                                                    for ms in (1.0, 0.8)], 1_800_000_600)
    at.switch_page("../pages/profile.py").run()
    assert not at.exception, at.exception
    newest, older = at.selectbox(key="profile_run").options
    assert newest.startswith("r18_stem · loop · ") and older.startswith("r18_stem · joint · ")  # no bare hash
    at.selectbox(key="profile_run").set_value(older).run()
    at.selectbox(key="profile_run_beside").set_value(newest).run()
    assert not at.exception, at.exception
    charts = _charts(at)
    curves = {t["name"]: t["y"] for t in charts["runs_curves"]["data"]}
    assert curves == {older: [0.9, 0.6, 0.6, 0.5], newest: [1.0, 0.8]}
    bests = next(d.value for d in at.get("dataframe") if older in d.value.columns)
    assert bests.to_dict("records") == [{"best ms of task": "conv", older: 0.5, newest: 0.8}]
    (par,) = charts["layout_parameters"]["data"]
    assert [d["label"] for d in par["dimensions"]] == ["tiles[0]", "tiles[1]", "ot", "it", "latency (ms)"]
    assert len(par["dimensions"][0]["values"]) == 2  # the two alt_tiled candidates (the default is in the title)
