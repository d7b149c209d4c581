"""A user's work in a real browser (Chromium through Playwright, the app served as ``make run``
serves it): model switches while networks import in two tabs at once break nothing, an action
and the tuning budget survive a page switch, a reload and a server restart, and a page's URL
opened directly finds the tab's work with the sidebar."""

from __future__ import annotations

import re
import time

import pytest

from tests.browser.test_e2e import ARTIFACTS, _free_port, _graph_drawn, _launch, needs_chromium, serving
from tests.browser.test_e2e import server  # noqa: F401 - the fixture
from workbench.engine.base.step import Step

pytestmark = pytest.mark.browser

#: every model the tabs open; the networks import through torch.export (seconds each)
NETWORKS = ("resnet18", "mobilenet_v2", "bert_layer")


def _pick(page, model: str) -> None:
    """Pick ``model`` in the sidebar's model picker (usable while the page reruns)."""
    page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text="Model").click()
    page.get_by_role("option", name=model, exact=True).click()


def _shows(page, model: str, timeout_ms: int = 180_000) -> None:
    """Wait until the Graph page draws ``model``'s graph (its caption names it) in an open session on it."""
    from playwright.sync_api import expect

    expect(page.get_by_text(re.compile(rf"^{model}: \d+ ops"))).to_be_visible(timeout=timeout_ms)
    expect(page.get_by_test_id("stSidebar").get_by_text(f"Session {model}: 0 actions")).to_be_visible()


def _failures(page) -> list[str]:
    """Tracebacks and error messages on the page."""
    shown = page.get_by_test_id("stException").all() + page.get_by_test_id("stAlertContentError").all()
    return [e.inner_text() for e in shown]


@needs_chromium
def test_model_switches_while_networks_import_in_two_tabs(server, tmp_path):  # noqa: F811
    """On a fresh server, tab A picks resnet18 and tab B mobilenet_v2; while both import, each
    picks the other. Both end on their last pick with no traceback or error, and then every
    network opens in each tab (an import that broke torch's state would fail here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            a, b = _graph_drawn(browser, server), _graph_drawn(browser, server)
            t0 = time.perf_counter()
            _pick(a, "resnet18")
            _pick(b, "mobilenet_v2")
            _pick(a, "mobilenet_v2")  # while the imports run
            _pick(b, "resnet18")
            _shows(a, "mobilenet_v2")
            _shows(b, "resnet18")
            storm_s = time.perf_counter() - t0
            failed = {"after the switches": _failures(a) + _failures(b)}
            for model in NETWORKS:  # each tab opens each network again
                for tab in (a, b):
                    _pick(tab, model)
                for tab in (a, b):
                    _shows(tab, model)
                    failed[model] = _failures(tab)
            a.screenshot(path=str(ARTIFACTS / "switch_storm.png"), full_page=True)
        finally:
            browser.close()
    assert not any(failed.values()), failed
    print(f"two tabs, four model switches during imports: both settled after {storm_s:.1f} s")


def _apply_tiled(page) -> None:
    """The Layouts page's ALT tiled preset on the conv (the sidebar then counts 1 action)."""
    from playwright.sync_api import expect

    page.get_by_role("link", name="Layouts").first.click()
    page.get_by_role("heading", name="Layouts", exact=True).wait_for(timeout=30_000)
    page.get_by_role("tab", name="Preset").click()
    page.get_by_test_id("stSelectbox").filter(has_text="Preset").click()
    page.get_by_role("option", name=re.compile("alt_tiled")).click()
    page.get_by_role("button", name="Apply preset alt_tiled").click()
    expect(page.get_by_test_id("stSidebar").get_by_text("1 action", exact=False)).to_be_visible(timeout=30_000)


def _finds_the_work(page, budget: str) -> None:
    """The tab shows the session with its action (the sidebar, the Graph page's propagation) and
    the Tuning page's budget; the URL keeps the workspace id on every page."""
    from playwright.sync_api import expect

    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_text("Session r18_stem: 1 action")).to_be_visible(timeout=60_000)
    page.get_by_role("link", name="Tuning").first.click()
    expect(page.get_by_label("Budget (measurements)")).to_have_value(budget, timeout=30_000)
    expect(page).to_have_url(re.compile(r"/tuning\?ws=[0-9a-f]{16}$"))


@needs_chromium
def test_an_action_and_the_budget_survive_navigation_a_reload_and_a_restart(tmp_path):
    """Apply a preset, set the tuning budget, go to another page: the URL keeps the workspace id,
    so a reload, a new tab on the URL and a restarted server all find the action and the budget."""
    from playwright.sync_api import expect, sync_playwright

    port = _free_port()
    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            with serving(tmp_path, port) as url:
                page = _graph_drawn(browser, url)
                _apply_tiled(page)
                page.get_by_role("link", name="Tuning").first.click()
                scored = page.get_by_text("Layout candidates scored:")  # says how many the budget scores
                before = scored.inner_text(timeout=30_000)
                budget = page.get_by_label("Budget (measurements)")
                budget.fill("12")
                budget.press("Enter")
                expect(scored).not_to_have_text(before, timeout=30_000)  # the page ran with the new budget
                page.get_by_role("link", name="Graph").first.click()
                expect(page.get_by_text("Last action changed the layout of")).to_be_visible(timeout=30_000)
                expect(page).to_have_url(re.compile(r"\?ws=[0-9a-f]{16}$"))
                workspace = page.url
                page.reload()
                expect(page.get_by_text("restored this tab's work")).to_be_visible(timeout=60_000)
                _finds_the_work(page, "12")
                tab = browser.new_page(viewport={"width": 1400, "height": 1000})
                tab.goto(workspace)
                _finds_the_work(tab, "12")
                tab.close()
            with serving(tmp_path, port):  # the server restarted, on the same work folder
                page.goto(workspace)
                _finds_the_work(page, "12")
                failures = _failures(page)
                page.screenshot(path=str(ARTIFACTS / "restored_after_restart.png"), full_page=True)
        finally:
            browser.close()
    assert not failures, failures


@needs_chromium
def test_a_direct_url_to_a_page_runs_the_entry_script_and_restores_the_tab(server, tmp_path):  # noqa: F811
    """A page's URL with a workspace id, opened in a new browser (a bookmark): the entry script
    runs first, so the page has its sidebar and the tab's work is restored on that page."""
    from playwright.sync_api import expect, sync_playwright

    from workbench.engine.session.session import new_session, replay
    from workbench.engine.session.workspace import new_workspace_id, save_workspace

    wid = new_workspace_id()
    tiled = replay(new_session(name="bookmarked")).push(Step.make("preset", "conv", "alt_tiled")).session
    save_workspace(tmp_path / "work" / "autosave", wid, tiled, {})  # the work folder the server uses
    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{server}/profile?ws={wid}")
            expect(page.get_by_role("heading", name="Profile", exact=True)).to_be_visible(timeout=60_000)
            sidebar = page.get_by_test_id("stSidebar")
            expect(sidebar.get_by_text("Session bookmarked: 1 action")).to_be_visible(timeout=30_000)
            expect(sidebar.get_by_test_id("stSelectbox").filter(has_text="Model")).to_be_visible()
            expect(sidebar.get_by_role("button", name="Undo")).to_be_enabled()  # the action, to undo
            expect(page.get_by_text("restored this tab's work: session bookmarked (1 action)")).to_be_visible()
            expect(page).to_have_url(re.compile(rf"/profile\?ws={wid}$"))
            failures = _failures(page)
            page.screenshot(path=str(ARTIFACTS / "direct_url.png"), full_page=True)
        finally:
            browser.close()
    assert not failures, failures
