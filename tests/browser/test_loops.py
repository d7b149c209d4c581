"""The Loops page in a real browser (Chromium through Playwright, the app served as ``make run``
serves it): a loop primitive applied to a tuned kernel (a MetaSchedule trace, its reduction
decomposed into ``conv_init`` / ``conv_update``) succeeds, from the arguments the form starts from."""

from __future__ import annotations

import pytest

from tests.browser.test_e2e import ARTIFACTS, _free_port, _launch, needs_chromium, serving
from tests.browser.test_work import _failures
from tests.tuned import tuned_state
from workbench.engine.session.workspace import load_workspace, new_workspace_id, save_workspace

pytestmark = pytest.mark.browser


@needs_chromium
def test_a_primitive_applied_to_a_tuned_kernel_on_the_loops_page_succeeds(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    autosave, wid = tmp_path / "work" / "autosave", new_workspace_id()
    save_workspace(autosave, wid, tuned_state().session, {})  # the tab's work after a tuning result's Apply
    with sync_playwright() as p:
        browser = _launch(p, tmp_path)
        try:
            with serving(tmp_path, _free_port()) as url:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"{url}/?ws={wid}")  # the app's entry first: it restores the workspace
                expect(page.get_by_text("restored this tab's work")).to_be_visible(timeout=60_000)
                page.get_by_role("link", name="Loops").first.click()
                expect(page.get_by_role("heading", name="Loops", exact=True)).to_be_visible(timeout=60_000)
                apply = page.get_by_role("button", name="Apply split")
                expect(apply).to_be_enabled(timeout=60_000)
                refused = page.get_by_text("would be refused").count()
                apply.click()
                expect(page.get_by_text("split applied to conv")).to_be_visible(timeout=60_000)
                expect(page.get_by_test_id("stSidebar").get_by_text("2 actions", exact=False)).to_be_visible()
                failures = _failures(page)
                page.screenshot(path=str(ARTIFACTS / "loops_tuned_kernel.png"), full_page=True)
        finally:
            browser.close()
    assert refused == 0 and not failures, (refused, failures)
    state = load_workspace(autosave, wid).state
    split = state.session.steps[-1]
    assert (split.kind, split.primitive, split.get("block")) == ("loop", "split", "conv_update")
    assert state.kernel_schedule("conv").trace is not None  # the split went on top of the tuned trace
