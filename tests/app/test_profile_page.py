"""The Profile page: a measurement draws the roofline and explains a kernel above its roof and its
miss bounds; variants by their short names in the figures' legends (below the plots) with the whole
action chain on hover and in a table, the roofline table's key columns first; the tab's tuning runs
side by side and a run's layout candidates as parallel coordinates."""

from __future__ import annotations

import json
import os

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import preset_form, session
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


@pytest.mark.slow
def test_profile_measures_draws_the_roofline_and_compares_cache_profiles(at, tmp_path):
    from workbench.engine.session.session import new_session, save
    from workbench.app import state as _state

    save(new_session("r18_stem", name="plain"), _state.SESSIONS_DIR / "plain.json")
    preset_form(at)
    at.selectbox(key="preset_name").set_value("alt_tiled").run()
    at.text_input(key="pp_tiles").input("4, 16").run()
    at.button(key="apply_preset").click().run()
    at.switch_page("../pages/profile.py").run()
    at.button(key="profile_measure").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    charts = {c.key: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    roof = charts["roofline"]
    assert any(t.get("name", "").startswith("conv") for t in roof["data"])  # the measured conv is on it
    rates = next(d.value for d in at.get("dataframe") if "% of copy" in d.value.columns)
    assert rates["kernel"].str.startswith("convert_").all() and (rates["GB/s"] > 0).all()
    assert rates["% of copy"].tolist() == pytest.approx((rates["GB/s"] / rates["GB/s"].iloc[0]
                                                         * rates["% of copy"].iloc[0]).tolist(), rel=1e-2)
    assert at.selectbox(key="profile_kernel").value == "conv"
    at.selectbox(key="profile_compare").set_value("plain").run()
    misses = json.loads(next(c for c in at.get("plotly_chart") if c.key == "misses").proto.spec)
    bars = {t["name"]: t["y"] for t in misses["data"]}
    assert set(bars) == {"current (r18_stem)", "plain"}
    l1 = 0  # the first bar: L1d misses, all lines; the tiled layout needs fewer than NCHW
    assert bars["current (r18_stem)"][l1] < bars["plain"][l1]
    from workbench.engine.measure.counters import perf_unavailable

    at.button(key="counters").click().run()
    assert not at.exception
    tables = {d.key for d in at.get("dataframe")}
    if reason := perf_unavailable():  # this machine exposes no PMU: the page says why
        assert any(i.value == f"Model only: {reason}" for i in at.info) and "counters_table" not in tables
    else:
        assert "counters_table" in tables


def test_profile_explains_a_kernel_above_its_roof_and_the_miss_bounds(at):
    from workbench.engine.measure.roofline import RooflinePoint

    # a 64 KiB copy in a microsecond: 128 GB/s, above any DRAM roof, yet its data fits a cache
    pad = RooflinePoint("pad", "v1", flops=0, bytes=64 * 1024, latency_ms=0.0005)
    at.session_state["timings"] = {"v1": {"pad": pad.latency_ms}}
    at.session_state["points"] = [pad]
    at.switch_page("../pages/profile.py").run()
    assert not at.exception, at.exception
    (table,) = [d.value for d in at.get("dataframe") if "% of roof" in d.value.columns]  # AppTest keeps no keys
    (row,) = table.to_dict("records")
    assert row["% of roof"] > 100 and row["buffers fit"] != "DRAM only"
    assert row["note"].startswith(f"above the DRAM roof: its 64 KiB of buffers fit {row['buffers fit']}")
    captions = " ".join(c.value for c in at.caption)
    assert "pad above 100% of the roof, which is no error" in captions  # the kernel by name
    assert "at least the compulsory misses" in captions
    assert any("bounded by" in d.value.columns for d in at.get("dataframe"))
