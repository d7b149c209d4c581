"""End to end in a real browser: the app served on 127.0.0.1 as ``make run`` serves it, Debian's
Chromium driven by Playwright. Apply the ALT tiled preset to r18_stem, build and measure, and see
the latency and the reference check. The screenshots and timings go to ``test-artifacts/``."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(tmp_path: Path, port: int) -> Iterator[str]:
    """The app served on ``port`` as ``make run`` serves it, its files under ``tmp_path``; yields
    its URL and stops it on exit (a second ``serving`` on the same folder is a restart)."""
    env = {**os.environ, "ALT_WORKBENCH_SESSIONS": str(tmp_path / "sessions"), "ALT_WORKBENCH_WORK": str(tmp_path / "work")}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.app",
                             "--server.headless", "true", "--server.address", "127.0.0.1", "--server.port", str(port),
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"streamlit did not start: {proc.stdout.read1().decode(errors='replace') if proc.stdout else ''}")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def server(tmp_path):
    with serving(tmp_path, _free_port()) as url:
        yield url


def _launch(playwright, tmp_path: Path):
    """Debian's Chromium, headless, with a home of its own (and the artifacts folder made)."""
    ARTIFACTS.mkdir(exist_ok=True)
    home = tmp_path / "home"
    return playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True,
        args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync"],
        env={**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
             "XDG_CACHE_HOME": str(home / ".cache")})


#: the graph's traces drawn in the chart's SVG (the chart's div exists before plotly has drawn)
_DRAWN = ".js-plotly-plot .scatterlayer .trace"


def _graph_drawn(browser, server: str):
    """A new 1400x1000 tab on the app, once its first page has drawn the graph."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(server)
    page.locator(_DRAWN).first.wait_for(timeout=60_000)
    return page

#: when the graph's static drawing and Plotly's chart first show, in seconds from navigation
#: (the time the frame after their insertion starts: they are painted by then)
_FIRST_SEEN = """window.altSeen = {};
new MutationObserver(() => {
  for (const [name, sel] of [["preview", ".graph-preview svg"], ["chart", ".js-plotly-plot .scatterlayer .trace"]])
    if (!(name in window.altSeen) && document.querySelector(sel)) {
      window.altSeen[name] = null;
      requestAnimationFrame(() => setTimeout(() => window.altSeen[name] = performance.now() / 1000));
    }
}).observe(document, {childList: true, subtree: true});"""

#: ms from the next click to the frame after ``text`` first shows (``window.altPainted``)
_PAINTED_AFTER_CLICK = """(text) => {
  window.altPainted = 0;
  document.addEventListener("click", () => {
    const t0 = performance.now();
    const seen = new MutationObserver(() => {
      if (!document.body.innerText.includes(text)) return;
      seen.disconnect();
      requestAnimationFrame(() => setTimeout(() => window.altPainted = performance.now() - t0));
    });
    seen.observe(document, {childList: true, subtree: true, characterData: true});
  }, {capture: true, once: true});
}"""
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (make browser)")


@needs_chromium
def test_preset_then_build_and_measure_in_chromium(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            tabs = browser.new_context(viewport={"width": 1400, "height": 1000})  # one window: tabs share its cache
            page = tabs.new_page()
            t0 = time.perf_counter()
            page.goto(server)
            page.get_by_role("heading", name="Computational graph").wait_for(timeout=60_000)
            page.locator(_DRAWN).first.wait_for(timeout=60_000)
            first_load_s = time.perf_counter() - t0
            page.screenshot(path=str(ARTIFACTS / "graph.png"), full_page=True)
            tab = tabs.new_page()  # a new tab: the server has imported and run everything once
            tab.add_init_script(_FIRST_SEEN)
            tab.goto(server)
            tab.wait_for_function("window.altSeen.chart > 0", timeout=60_000)
            seen = tab.evaluate("window.altSeen")  # seconds from navigation (the page's own clock)
            assert 0 < seen["preview"] < seen["chart"], seen  # the static drawing came first...
            assert tab.locator(".graph-preview").first.is_hidden()  # ...and the chart replaced it
            tab.close()

            # Layouts page: the ALT tiled preset on the conv
            page.get_by_role("link", name="Layouts").first.click()
            page.get_by_role("heading", name="Layouts", exact=True).wait_for(timeout=30_000)
            page.get_by_role("tab", name="Preset").click()
            page.get_by_test_id("stSelectbox").filter(has_text="Preset").click()  # open the preset selectbox
            page.get_by_role("option", name=re.compile("alt_tiled")).click()
            page.evaluate(_PAINTED_AFTER_CLICK, "alt_tiled applied to conv")
            t0 = time.perf_counter()
            page.get_by_role("button", name="Apply preset alt_tiled").click()
            page.get_by_text("alt_tiled applied to conv").wait_for(timeout=30_000)
            apply_s = time.perf_counter() - t0
            page.wait_for_function("window.altPainted > 0", timeout=30_000)
            painted_ms = page.evaluate("window.altPainted")

            # The graph shows the propagated layout
            t0 = time.perf_counter()
            page.get_by_role("link", name="Graph").first.click()
            expect(page.get_by_text("Last action changed the layout of")).to_be_visible(timeout=30_000)
            page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
            graph_s = time.perf_counter() - t0
            page.screenshot(path=str(ARTIFACTS / "graph_tiled.png"), full_page=True)

            # Loops page: build, verify and time
            t0 = time.perf_counter()
            page.get_by_role("link", name="Loops").first.click()
            page.get_by_text("T.prim_func").first.wait_for(timeout=30_000)
            loops_s = time.perf_counter() - t0
            page.get_by_role("button", name="Build, verify and time the program").click()
            page.get_by_text("matches reference").first.wait_for(timeout=180_000)
            latency = page.get_by_test_id("stMetricValue").first.inner_text()
            page.screenshot(path=str(ARTIFACTS / "loops_measured.png"), full_page=True)
        finally:
            browser.close()
    assert re.fullmatch(r"\d+\.\d{3} ms", latency.strip()), latency
    assert float(latency.split()[0]) > 0
    figures = (f"first page load (graph drawn), fresh server {first_load_s:.2f} s\n"
               f"new tab, warm server: graph drawn (static) {seen['preview']:.2f} s, "
               f"interactive chart drawn {seen['chart']:.2f} s\n"
               f"apply preset -> page updated {apply_s * 1e3:.0f} ms (by the page's clock, from the click to the "
               f"result painted: {painted_ms:.0f} ms)\n"
               f"graph page with the new layouts {graph_s * 1e3:.0f} ms\n"
               f"loops page with the loop nest {loops_s * 1e3:.0f} ms\nprogram latency {latency}\n")
    print(figures)  # benchmark figures (pytest -s shows them), not limits: this machine's load varies
    (ARTIFACTS / "e2e.txt").write_text(figures)


#: the drawn edges: the SVG paths in the edges' grey (boxes and kernel outlines have other colours)
_EDGES_JS = """() => [...document.querySelectorAll('.js-plotly-plot .scatterlayer .trace path.js-line')]
    .filter(p => p.style.stroke === 'rgb(140, 140, 140)').map(p => p.getAttribute('d') || '')"""


#: every non-empty text the chart drew: (text, left, top, right, bottom) in pixels
_LABELS_JS = """() => [...document.querySelectorAll('.js-plotly-plot text')].filter(t => t.textContent.trim())
    .map(t => { const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.top, r.right, r.bottom]; })"""


def _vertical_runs(d_attrs: list[str]) -> list[tuple[int, float, float, float]]:
    """Vertical segments of the drawn SVG paths as (subpath, x, y_top, y_bottom) in pixels."""
    runs, sub = [], 0
    for d in d_attrs:
        for part in re.findall(r"M[^M]+", d):
            pts = [tuple(map(float, xy.split(","))) for xy in re.findall(r"-?[\d.]+,-?[\d.]+", part)]
            runs += [(sub, a[0], min(a[1], b[1]), max(a[1], b[1])) for a, b in zip(pts, pts[1:])
                     if abs(a[0] - b[0]) < 0.5 and abs(a[1] - b[1]) > 1]
            sub += 1
    return runs


@needs_chromium
def test_graph_page_draws_the_skip_connection_beside_the_main_chain(server, tmp_path):
    """r18_block's data -> add edge is drawn in a lane of its own: the longest straight run of any
    edge in the SVG, and no other edge runs within 20 px of it over the same height; no two of the
    drawn labels (ops, edges' tensors and shapes, kernels, legend) overlap."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(server)
            page.get_by_role("heading", name="Computational graph").wait_for(timeout=60_000)
            page.get_by_test_id("stSelectbox").filter(has_text="Model").click()
            page.get_by_role("option", name="r18_block", exact=True).click()
            # the new model's drawing, not the previous one still on screen
            expect(page.locator(".js-plotly-plot text", has_text="conv2_bias").first).to_be_visible(timeout=45_000)
            runs = _vertical_runs(page.evaluate(_EDGES_JS))
            labels = page.evaluate(_LABELS_JS)
            page.screenshot(path=str(ARTIFACTS / "graph_r18_block.png"), full_page=True)
        finally:
            browser.close()
    overlapping = [(a[0], b[0]) for i, a in enumerate(labels) for b in labels[i + 1:]
                   if min(a[3], b[3]) - max(a[1], b[1]) > 1 and min(a[4], b[4]) - max(a[2], b[2]) > 1]
    assert len(labels) > 15 and not overlapping, overlapping  # every op and edge label readable
    sub, x, top, bottom = max(runs, key=lambda r: r[3] - r[2])
    chain = [r for r in runs if r[0] != sub and r[2] < bottom and r[3] > top]  # other edges beside the lane
    assert bottom - top > 150, runs  # the skip edge spans conv1 ... conv2_bias
    assert len(chain) >= 4 and all(abs(r[1] - x) > 20 for r in chain), (x, chain)


#: how far the page and each element reach past the window's right edge (0: nothing overflows)
_OVERFLOW_JS = """() => {
    const width = document.documentElement.clientWidth;
    const main = document.querySelector('[data-testid="stMain"]') || document.body;
    const over = [...main.querySelectorAll('[data-testid="stColumn"], pre, table, [data-testid="stDataFrame"]')]
        .map(e => e.getBoundingClientRect().right - width).filter(d => d > 1);
    return {page: document.documentElement.scrollWidth - width, elements: over.length};
}"""


@needs_chromium
def test_a_narrow_window_stacks_the_panes_with_no_horizontal_overflow(server, tmp_path):
    """At 1000x700 the sidebar starts collapsed (and closes again after a page is picked in it),
    the Loops page's two nests stack (one above the
    other, each at the window's width, long lines wrapped within it), and nothing runs past the
    window; a new tab at 1400 px has the sidebar open."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.goto(server)
            page.get_by_role("heading", name="Computational graph").wait_for(timeout=60_000)
            sidebar = page.get_by_test_id("stSidebar")
            expect(sidebar).to_have_attribute("data-collapsed", "true", timeout=10_000)
            # the main area slides to the window's left edge (the sidebar no longer takes its width)
            page.wait_for_function("() => document.querySelector('[data-testid=stMain]')"
                                   ".getBoundingClientRect().left < 1", timeout=5_000)
            page.get_by_test_id("stExpandSidebarButton").click()  # the pages' links are in the sidebar
            page.get_by_role("link", name="Loops").first.click()
            page.locator(".nest-one").first.get_by_text("T.prim_func").first.wait_for(timeout=30_000)
            expect(sidebar).to_have_attribute("data-collapsed", "true")  # closed again once a page is picked
            page.wait_for_function("() => document.querySelector('[data-testid=stMain]')"
                                   ".getBoundingClientRect().left < 1", timeout=5_000)  # the sidebar slid away
            overflow = page.evaluate(_OVERFLOW_JS)
            pair_shown = page.locator(".nest-pair").first.is_visible()
            stacked = [page.locator(".nest-one").nth(i).bounding_box() for i in range(2)]  # before, after
            page.screenshot(path=str(ARTIFACTS / "loops_narrow.png"), full_page=True)
            wide = browser.new_page(viewport={"width": 1400, "height": 900})  # a new tab, wide
            wide.goto(server)
            wide.get_by_role("heading", name="Computational graph").wait_for(timeout=60_000)
            wide.wait_for_timeout(1000)  # time to collapse it, were it to
            wide_sidebar = wide.get_by_test_id("stSidebar").get_attribute("data-collapsed")
        finally:
            browser.close()
    assert wide_sidebar == "false"
    assert overflow == {"page": 0, "elements": 0}, overflow
    assert not pair_shown and all(stacked), stacked  # the two nests one above the other, not side by side
    before, after = stacked
    assert after["y"] >= before["y"] + before["height"] and all(b["x"] >= 0 and b["x"] + b["width"] <= 1000
                                                                for b in stacked), stacked
    assert before["width"] > 600, stacked  # each nest at the window's width (long lines wrap within it)


@needs_chromium
def test_an_uploaded_onnx_network_opens_on_the_graph_page(server, tmp_path):
    """The Sessions page imports an ONNX file (a small CNN made here by torch's exporter): the new
    session's graph is drawn with the imported ops, and the sidebar names the file."""
    from playwright.sync_api import expect, sync_playwright

    from tests.engine.models.frontend.test_import import write_model

    path, _, _ = write_model(tmp_path, "Convs", "onnx_legacy")
    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            page = _graph_drawn(browser, server)
            page.get_by_role("link", name="Sessions").first.click()
            page.get_by_role("heading", name="Import a model").wait_for(timeout=30_000)
            page.get_by_test_id("stFileUploader").filter(has_text="An ONNX file").locator(
                "input[type=file]").set_input_files(str(path))
            page.get_by_role("button", name="Import the model").click()
            expect(page.get_by_text(f"imported {path.name}:")).to_be_visible(timeout=60_000)
            page.get_by_role("link", name="Graph").first.click()
            # the imported ops are drawn: its transposed conv and softmax are nowhere in r18_stem
            expect(page.locator(".js-plotly-plot text", has_text=re.compile(r"^softmax")).first).to_be_visible(
                timeout=45_000)
            expect(page.locator(".js-plotly-plot text", has_text=re.compile(r"^tconv")).first
                   ).to_be_visible()
            sidebar = page.get_by_test_id("stSidebar").inner_text()
            page.screenshot(path=str(ARTIFACTS / "graph_imported.png"), full_page=True)
        finally:
            browser.close()
    assert f"Session {path.stem}-" in sidebar, sidebar  # the new session, named after the stored file


#: ms from the next click to the frame after the side-by-side loop nests' text changed (``window.altNest``)
_NEST_PAINTED_AFTER_CLICK = """() => {
  window.altNest = 0;
  const nest = () => (document.querySelector(".nest-pair") || {}).textContent || "";
  document.addEventListener("click", () => {
    const t0 = performance.now(), before = nest();
    const seen = new MutationObserver(() => {
      if (nest() === before) return;
      seen.disconnect();
      requestAnimationFrame(() => setTimeout(() => window.altNest = performance.now() - t0));
    });
    seen.observe(document, {childList: true, subtree: true, characterData: true});
  }, {capture: true, once: true});
}"""


@needs_chromium
def test_the_loops_page_refuses_a_bad_split_before_apply(server, tmp_path):
    """Factors that over-cover the chosen loop are refused as they are typed: the page says why and
    Apply stays disabled, the session keeps no action; valid factors apply, and the click -> new
    loop nest painted time goes to the test log (a figure, not a limit)."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            page = _graph_drawn(browser, server)
            page.get_by_role("link", name="Loops").first.click()
            page.get_by_text("T.prim_func").first.wait_for(timeout=30_000)
            page.get_by_test_id("stSelectbox").filter(has_text="loop of conv").click()
            page.get_by_role("option", name="i1 (extent 64)").click()
            factors = page.get_by_label(re.compile(r"^factors .*extent 64"))
            factors.fill("-1, 128")
            factors.press("Enter")
            refusal = page.get_by_text(re.compile(r"split would be refused: .*128"))
            expect(refusal).to_be_visible(timeout=30_000)
            # by state, not position: during a rerun the old button may stand beside the new one
            enabled = page.get_by_role("button", name="Apply split", disabled=False)
            disabled = page.get_by_role("button", name="Apply split", disabled=True)
            expect(disabled).to_have_count(1, timeout=30_000)
            expect(enabled).to_have_count(0)
            refused = refusal.inner_text()
            factors.fill("-1, 16")
            factors.press("Enter")
            expect(refusal).to_have_count(0, timeout=30_000)
            expect(enabled).to_have_count(1, timeout=30_000)
            expect(disabled).to_have_count(0, timeout=30_000)
            apply = enabled
            expect(page.get_by_test_id("stSidebar").get_by_text("0 actions")).to_be_visible()
            page.evaluate(_NEST_PAINTED_AFTER_CLICK)
            apply.click()
            expect(page.get_by_test_id("stSidebar").get_by_text("1 action", exact=False)).to_be_visible(timeout=30_000)
            page.wait_for_function("window.altNest > 0", timeout=30_000)
            nest_ms = page.evaluate("window.altNest")
            after = page.locator(".nest-pair").first.inner_text()
        finally:
            browser.close()
    assert "64" in refused, refused  # the reason names the loop's extent
    assert "i1_0" in after and "i1_1" in after, after[:500]  # the split's two loops in the new nest
    figure = f"loops page: apply split -> new loop nest painted {nest_ms:.0f} ms (by the page's clock)\n"
    print(figure)
    (ARTIFACTS / "e2e_loops.txt").write_text(figure)
