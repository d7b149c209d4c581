"""ALT Workbench: ``python -m workbench.app`` (``make run``) or ``streamlit run workbench/app/main.py``.

The entry point: page config, the sidebar every page shares (model, target, undo/redo) and
``st.navigation`` over the pages. A new tab opens on ``r18_stem`` with a fresh session; a URL with
a workspace id (``?ws=``, kept across page switches) opens that tab's work again. An error in
the sidebar or a page shows as one line, and the tab's work is saved after every run.

``python -m workbench.app [streamlit flags]`` (``app/serve.py``) serves the app like ``streamlit run`` and imports
the engine (TVM, PyTorch: seconds) in a thread while the server starts; ``streamlit run`` imports
it in the first tab's run. Meanwhile a new tab shows the Graph page as it last drew it (``first_view``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import streamlit as st

# `streamlit run workbench/app/main.py` puts workbench/app/ on sys.path, not the repository root
ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _plotly_chunk() -> str:
    """The file name of Streamlit's Plotly chart module (hashed per release), "" if none is found."""
    return next((p.name for p in (Path(st.__file__).parent / "static" / "static" / "js").glob("PlotlyChart.*.js")), "")


# Page config and the page's script first: on a fresh server this run then waits for the engine's
# import (warm_up holds it), and the browser meanwhile fetches and evaluates Plotly (below).
st.set_page_config(page_title="ALT Workbench", page_icon=":material/grid_view:", layout="wide")
# Narrow windows (a laptop with the sidebar open): side-by-side panes stack instead of squeezing
# loop nests to 30 characters a line, and table cells wrap. The sidebar starts collapsed at
# <= 1100 px (Streamlit's "auto" does so below 768 px only) and opens again when the window
# grows, until the user toggles it: a choice Streamlit keeps, so ours are not stored.
st.html("""<style>
@media (max-width: 1100px) {
  [data-testid="stHorizontalBlock"] { flex-wrap: wrap !important; }
  [data-testid="stHorizontalBlock"] > [data-testid="stColumn"] {
    flex: 1 1 100% !important; width: 100% !important; min-width: 100% !important; }
  [data-testid="stMarkdownContainer"] td, [data-testid="stMarkdownContainer"] th {
    white-space: normal !important; overflow-wrap: anywhere; }
}
</style>
<script>
(() => {
  if (window.altSidebarFit) return;
  // Streamlit loads Plotly (4.7 MB) only when a chart arrives, then takes 1-2 s to evaluate it:
  // start now, while the server runs the page, so the graph's chart draws as soon as it comes
  const chunk = "PLOTLY_CHUNK", main = document.querySelector('script[src*="/static/js/index."]');
  if (chunk && main) import(main.src.replace(/index\\.[^/]+\\.js$/, chunk)).catch(() => {});
  const stored = () => Object.keys(localStorage).filter(k => k.startsWith("stSidebarCollapsed-"));
  let auto = stored().length === 0;
  window.altSidebarFit = () => {
    const bar = document.querySelector('[data-testid="stSidebar"]');
    if (!auto || !bar) return;
    const open = bar.getAttribute("data-collapsed") === "false";
    if (open !== (window.innerWidth <= 1100)) return;
    document.querySelector(open ? '[data-testid="stSidebarCollapseButton"] button'
                                : '[data-testid="stExpandSidebarButton"]')?.click();
    setTimeout(() => stored().forEach(k => localStorage.removeItem(k)));
  };
  document.addEventListener("click", e => {
    const toggle = '[data-testid="stSidebarCollapseButton"], [data-testid="stExpandSidebarButton"]';
    if (e.isTrusted && e.target.closest(toggle)) auto = false;
    // a narrow window: the sidebar, opened to pick a page, gives the page its room again
    if (window.innerWidth <= 1100 && e.target.closest('[data-testid="stSidebarNav"] a'))
      setTimeout(() => {
        document.querySelector('[data-testid="stSidebarCollapseButton"] button')?.click();
        setTimeout(() => stored().forEach(k => localStorage.removeItem(k)));
      }, 50);
  }, true);
  addEventListener("resize", () => setTimeout(window.altSidebarFit, 100));
  // childList too: the sidebar is drawn only once st.navigation has run, after the engine's import
  new MutationObserver(() => window.altSidebarFit()).observe(document.body, {attributes: true, subtree: true,
                                                                             childList: true,
                                                                             attributeFilter: ["data-collapsed"]});
  window.altSidebarFit();
})();
</script>""".replace("PLOTLY_CHUNK", _plotly_chunk()), unsafe_allow_javascript=True)

# A new tab on a fresh server: the Graph page as it last drew it, while the engine imports (first_view)
from workbench.app import first_view, startup  # noqa: E402 - Streamlit alone: nothing of the engine yet

first_view.show()
first_view.TAB_STARTED.set()
try:
    startup.import_engine()
except Exception as e:  # noqa: BLE001 - TVM or PyTorch missing or broken: one line, not a stale view
    first_view.take_away()
    st.error(f"The engine could not be imported ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
             "run `make venv` to install what requirements.txt pins, then reload.")
    st.stop()

from workbench.engine.models import zoo  # noqa: E402
from workbench.engine.build.targets import cpu_name, resolve_target  # noqa: E402
from workbench.engine.base.words import plural  # noqa: E402
from workbench.app import messages  # noqa: E402
from workbench.app import state as _state  # noqa: E402

_state.init()
_state.keep_url()


def _keep_model(model: str) -> None:
    st.session_state.model_pick = model


def model_picker(model: str) -> None:
    """The zoo model or network; the open session decides what it shows (an imported model's file
    too). Switching with unsaved actions asks first (the session would be replaced by a fresh one)."""
    models = [*zoo.MODELS, *zoo.NETWORKS] + ([] if model in zoo.MODELS or model in zoo.NETWORKS else [model])
    # a session of another model was opened (or a run without the sidebar dropped the widget's value)
    if st.session_state.get("model_shown") != model or "model_pick" not in st.session_state:
        st.session_state.model_pick = st.session_state.model_shown = model
    pick = st.selectbox("Model", models, key="model_pick",
                        help="Every model of the zoo; switching starts a fresh session on it.")
    if pick == model:
        return
    if lost := _state.unsaved():
        st.warning(f"Switching to **{pick}** replaces this session: its {plural(lost, 'unsaved action')} on {model} "
                   "would be lost (save it on the Sessions page first).")
        yes, no = st.columns(2)
        yes.button("Discard and switch", key="switch_confirm", on_click=_state.switch_model, args=(pick,))
        no.button(f"Keep {model}", key="switch_cancel", on_click=_keep_model, args=(model,))
    else:
        with st.spinner(f"opening {pick}…"):
            _state.switch_model(pick)
        st.rerun()


def sidebar() -> None:
    s = _state.session()
    with st.sidebar:
        st.markdown("### ALT Workbench")
        model_picker(zoo.model_label(s.model))
        built = resolve_target(s.target)
        st.caption(f"Target `{json.dumps(s.target)}`  \nHost: {cpu_name()} "
                   f"(LLVM: `{built.get('mcpu', 'generic')}`), num-cores {s.target.get('num-cores', '?')}")
        st.caption(f"Session **{s.name}**: {plural(len(s.steps), 'action')}")
        left, right = st.columns(2)
        left.button("Undo", key="undo", icon=":material/undo:", disabled=not s.steps, width="stretch",
                    on_click=_state.act, args=(lambda x: x.undo(), "undone"))
        right.button("Redo", key="redo", icon=":material/redo:", disabled=not s.redo_stack, width="stretch",
                     on_click=_state.act, args=(lambda x: x.redo(), "redone"))
        if (ms := st.session_state.get("last_action_ms")) is not None:
            st.caption(f"last action: propagated in {ms:.0f} ms")


# The page scripts live in workbench/pages/, not beside this script: a `pages/` folder next to the
# entry script would make Streamlit serve a page's URL without running this script first.
PAGES_DIR = Path(__file__).resolve().parents[1] / "pages"
PAGES = [
    st.Page(PAGES_DIR / "graph.py", title="Graph", icon=":material/account_tree:", default=True),
    st.Page(PAGES_DIR / "layouts.py", title="Layouts", icon=":material/grid_view:"),
    st.Page(PAGES_DIR / "loops.py", title="Loops", icon=":material/loop:"),
    st.Page(PAGES_DIR / "tuning.py", title="Tuning", icon=":material/speed:"),
    st.Page(PAGES_DIR / "profile.py", title="Profile", icon=":material/monitoring:"),
    st.Page(PAGES_DIR / "sessions.py", title="Sessions", icon=":material/save:"),
]

nav = st.navigation(PAGES)
_state.keep_widgets(nav.url_path)
try:
    with messages.guard("the sidebar"):
        sidebar()
    with messages.guard(f"the {nav.title} page"):
        nav.run()
finally:  # also when the page ends in st.rerun: e.g. a job it started
    try:
        first_view.take_away()  # if the page did not (it failed before it drew)
    finally:
        _state.end_run()
