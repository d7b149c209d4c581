"""The first tab after ``make run``: a fresh server, a fresh browser, the tab opened the moment
the server answers. The browser asks for Plotly before the page's content arrives (the server is
still importing the engine), so the graph's chart draws as soon as it comes. The times go to the
test log and ``test-artifacts/first_tab.txt`` (figures of this machine, not limits)."""

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


@needs_chromium
def test_the_first_tab_fetches_plotly_before_the_graph_arrives(tmp_path):
    from playwright.sync_api import sync_playwright

    t0 = time.perf_counter()
    with serving(tmp_path, _free_port()) as url, sync_playwright() as p:
        up_s = time.perf_counter() - t0
        browser = _launch(p, tmp_path)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(_SEEN)
            page.goto(url)
            page.wait_for_function("window.altSeen.chart > 0", timeout=120_000)
            seen = page.evaluate("window.altSeen")
            asked = page.evaluate(_ASKED)
            page.screenshot(path=str(ARTIFACTS / "first_tab.png"))
        finally:
            browser.close()
    assert asked is not None and asked < seen["title"] < seen["chart"]  # Plotly asked for before the page came
    figures = (f"server answering {up_s:.2f} s after start; first tab, from navigation: Plotly asked for "
               f"{asked:.2f} s, title {seen['title']:.2f} s, graph drawn (static) {seen.get('preview') or 0:.2f} s, "
               f"interactive chart drawn {seen['chart']:.2f} s\n")
    print(figures)  # benchmark figures (pytest -s shows them), not limits: this machine's load varies
    (ARTIFACTS / "first_tab.txt").write_text(figures)
