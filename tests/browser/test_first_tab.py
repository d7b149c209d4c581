"""The first tab after ``make run``: a fresh server, a fresh browser, the tab opened the moment
the server answers, twice: on the first start and after a restart, when the tab shows the Graph
page as it was last drawn (``app.first_view``) while the server imports the engine. The browser
asks for Plotly before the chart arrives, so the chart draws as soon as it comes. The times go to
the test log and ``test-artifacts/first_tab.txt`` (figures of this machine, not limits)."""

from __future__ import annotations

import time

import pytest

from tests.browser.test_e2e import ARTIFACTS, _free_port, _launch, needs_chromium, serving

pytestmark = pytest.mark.browser

#: when the page's title and the graph (static drawing, Plotly's chart) first show, in seconds from
#: navigation (the frame after their insertion)
_SEEN = """window.altSeen = {};
new MutationObserver(() => {
  for (const [name, sel] of [["title", "h1"], ["preview", ".graph-preview svg"],
                             ["first_view", ".st-key-first_view .graph-preview svg"],
                             ["chart", ".js-plotly-plot .scatterlayer .trace"]])
    if (!(name in window.altSeen) && document.querySelector(sel)) {
      window.altSeen[name] = null;
      requestAnimationFrame(() => setTimeout(() => window.altSeen[name] = performance.now() / 1000));
    }
}).observe(document, {childList: true, subtree: true});
performance.setResourceTimingBufferSize(5000);"""
#: when the page asked for Streamlit's Plotly module, in seconds from navigation (None: never)
_ASKED = """(performance.getEntriesByType("resource").find(e => e.name.includes("/PlotlyChart.")) || {}).startTime
    / 1000 || null"""


def _at(t: float | None) -> str:
    return "never (the chart came first)" if t is None else f"{t:.2f} s"


def _first_tab(tmp_path, p) -> tuple[float, dict, float | None]:
    """Start the server on ``tmp_path``'s files, open a tab the moment it answers; returns the
    seconds until it answered, when the page's parts were seen and when Plotly was asked for."""
    t0 = time.perf_counter()
    with serving(tmp_path, _free_port()) as url:
        up_s = time.perf_counter() - t0
        browser = _launch(p, tmp_path)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(_SEEN)
            page.goto(url)
            page.wait_for_function("window.altSeen.chart > 0", timeout=120_000)
            # the page's own title alone: the first view, if any, gave the page its place
            page.wait_for_function("document.querySelectorAll('h1').length === 1", timeout=30_000)
            seen = page.evaluate("window.altSeen")
            asked = page.evaluate(_ASKED)
            page.screenshot(path=str(ARTIFACTS / "first_tab.png"))
        finally:
            browser.close()
    return up_s, seen, asked


@needs_chromium
def test_the_first_tab_draws_its_graph_before_the_engine_and_plotly_are_ready(tmp_path):
    from playwright.sync_api import sync_playwright

    lines = []
    with sync_playwright() as p:
        # the first start remembers the Graph page's view; a restart shows it while the engine imports
        for run in ("first start, nothing remembered", "restart, first view remembered"):
            up_s, seen, asked = _first_tab(tmp_path, p)
            assert asked is not None and asked < seen["chart"]  # Plotly asked for before the chart came
            if run.startswith("restart"):  # the remembered drawing came before the engine (and the chart)
                assert seen["first_view"] < seen["chart"]
            else:
                assert "first_view" not in seen
            lines.append(f"{run}: server answering {up_s:.2f} s after start; first tab, from navigation: "
                         f"Plotly asked for {asked:.2f} s, title {seen['title']:.2f} s, graph drawn (static) "
                         f"{_at(seen.get('first_view') or seen.get('preview'))}, interactive chart drawn "
                         f"{seen['chart']:.2f} s")
    figures = "\n".join(lines) + "\n"
    print(figures)  # benchmark figures (pytest -s shows them), not limits: this machine's load varies
    (ARTIFACTS / "first_tab.txt").write_text(figures)
