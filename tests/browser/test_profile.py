"""The Profile page in a real browser at a narrow window (1000 px): the roofline
draws every measured point inside its plot, the plot keeps most of the figure's width (the
legend, with short variant names, sits below it) and its axis titles are whole."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_e2e import ARTIFACTS, _free_port, _launch, needs_chromium, serving

pytestmark = pytest.mark.browser

#: the action chain a variant was named after before short names (the issue's 100-character legend entries)
CHAIN = ("conv: split, split, reorder, fuse · data@conv: unfold, pad · conv: parallel, vectorize, unroll · "
         "relu: fuse, parallel, vectorize")

#: the roofline's drawing: plot area, figure, legend entries, axis titles, and every marker's centre per trace
_ROOFLINE_JS = """(el) => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {
    plot: box(el.querySelector('.nsewdrag')), figure: box(el.querySelector('svg.main-svg')),
    legend: [...el.querySelectorAll('.legend .legendtext')].map(t => t.textContent),
    titles: [...el.querySelectorAll('.xtitle, .ytitle')].map(box),
    traces: [...el.querySelectorAll('.scatterlayer .trace')].map(t => [...t.querySelectorAll('path.point')]
      .map(p => { const [l, u, r, d] = box(p); return [(l + r) / 2, (u + d) / 2]; })),
  };
}"""

#: the column headers a data grid draws (its accessible table holds the columns in view only)
_HEADERS_JS = "(el) => [...el.querySelectorAll('[role=columnheader]')].map(h => h.textContent)"


def _seeded_workspace(work) -> tuple[str, int]:
    """A workspace on r18_stem with three variants measured before short names (their labels
    the whole chain), each with the conv and a memory-bound kernel far to its left; returns its
    id and the number of points with FLOPs it holds."""
    from dataclasses import asdict

    from workbench.engine.measure.roofline import RooflinePoint, program_points
    from workbench.engine.session.session import new_session, replay
    from workbench.engine.session.workspace import new_workspace_id, save_workspace

    session = new_session("r18_stem")
    program = replay(session).program
    labels = [f"v{i}: {CHAIN}" for i in (1, 2, 3)]
    points = []
    for label, ms in zip(labels, (40.0, 4.0, 0.8)):  # 6 to 300 GFLOP/s
        points += program_points(program, {k.name: ms for k in program.plan.kernels}, label)
        points.append(RooflinePoint("scale", label, 10**6, 8 * 10**7, ms / 4))  # 1/80 FLOP per byte
    data = {"variants": [{"variant": v, "action chain": CHAIN, "total_ms": 1.0} for v in labels],
            "timings": {v: {p.kernel: p.latency_ms for p in points if p.variant == v} for v in labels},
            "points": [asdict(p) for p in points]}
    wid = new_workspace_id()
    save_workspace(work / "autosave", wid, session, data)
    return wid, sum(1 for p in points if p.flops)


@needs_chromium
def test_the_roofline_draws_every_measured_point_in_a_1000_px_window(tmp_path):
    """Three restored variants and one measured here: every kernel's marker is drawn inside the
    plot area, which keeps at least 60% of the figure's width; the legend names v1 ... v4. At
    1400 px the roofline table draws its key columns with no sideways scrolling (the grid draws
    the columns in view only)."""
    from playwright.sync_api import expect, sync_playwright

    wid, seeded = _seeded_workspace(tmp_path / "work")
    with serving(tmp_path, _free_port()) as url, sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.goto(f"{url}/?ws={wid}")  # the app's first page; the sidebar, collapsed at this width, has the rest
            page.get_by_role("heading", name="Computational graph").wait_for(timeout=120_000)
            page.get_by_test_id("stExpandSidebarButton").click()
            page.get_by_role("link", name="Profile").first.click()
            page.get_by_role("heading", name="Profile", exact=True).wait_for(timeout=60_000)
            roofline = page.locator(".js-plotly-plot").filter(has_text="arithmetic intensity").first
            expect(roofline.locator(".legendtext", has_text=re.compile(r"^v3$"))).to_have_count(1, timeout=180_000)
            page.get_by_role("button", name="Build, verify and time the current session").click()
            expect(roofline.locator(".legendtext", has_text=re.compile(r"^v4$"))).to_have_count(1, timeout=180_000)
            roofline.scroll_into_view_if_needed()
            page.wait_for_timeout(500)  # Plotly's redraw after the rerun
            drawn = roofline.evaluate(_ROOFLINE_JS)
            page.screenshot(path=str(ARTIFACTS / "profile_roofline_1000.png"), full_page=True)
            wide = browser.new_page(viewport={"width": 1400, "height": 1000})  # a new tab on the work, sidebar open
            wide.goto(f"{url}/?ws={wid}")
            wide.get_by_role("heading", name="Computational graph").wait_for(timeout=120_000)
            wide.get_by_role("link", name="Profile").first.click()
            table = wide.get_by_test_id("stDataFrame").filter(has_text="FLOP/byte").first
            table.wait_for(timeout=60_000)
            wide.wait_for_timeout(1000)  # the grid draws its columns
            headers = table.evaluate(_HEADERS_JS)
        finally:
            browser.close()
    legend = drawn["legend"]
    library = sum(1 for t in legend if t.endswith("(library)"))  # a reference star each, not a kernel
    markers = [xy for trace in drawn["traces"] for xy in trace]
    assert len(markers) - library == seeded + 1, (len(markers), library, seeded)  # + the conv measured here
    left, top, right, bottom = drawn["plot"]
    outside = [xy for xy in markers if not (left - 1 <= xy[0] <= right + 1 and top - 1 <= xy[1] <= bottom + 1)]
    assert not outside, (outside, drawn["plot"])
    f_left, f_top, f_right, f_bottom = drawn["figure"]
    assert right - left >= 0.6 * (f_right - f_left), drawn  # the data's width, not the legend's
    assert f_right <= 1000 and all(f_left <= t[0] and t[2] <= f_right and t[3] <= f_bottom for t in drawn["titles"])
    assert {"v1", "v2", "v3", "v4"} <= set(legend) and max(map(len, legend)) < 60, legend
    assert {"latency ms", "GFLOP/s", "% of roof"} <= set(headers), headers
