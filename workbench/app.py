"""ALT Workbench: ``streamlit run workbench/app.py`` (or ``make run``).

The entry point: page config, the sidebar every page shares (model, target, undo/redo) and
``st.navigation`` over the pages. A new tab opens on ``r18_stem`` with a fresh session.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import streamlit as st

# `streamlit run workbench/app.py` puts workbench/ on sys.path, not the repository root
ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from workbench.engine import zoo  # noqa: E402
from workbench.engine.program import resolve_target  # noqa: E402
from workbench.engine.session import new_session  # noqa: E402
from workbench.pages import _state  # noqa: E402

st.set_page_config(page_title="ALT Workbench", page_icon=":material/grid_view:", layout="wide")
_state.init()


def sidebar() -> None:
    s = _state.session()
    with st.sidebar:
        st.markdown("### ALT Workbench")
        models = list(zoo.MODELS)
        model = s.model.get("zoo")
        pick = st.selectbox("Model", models, index=models.index(model) if model in models else 0, key="model_pick",
                            help="Every model of the zoo; switching starts a fresh session on it.")
        if pick != model:
            _state.open_session(new_session(pick))
            st.rerun()
        built = resolve_target(s.target)
        st.caption(f"Target `{json.dumps(s.target)}`  \nHost: {_state.host_cpu()} "
                   f"(LLVM: `{built.get('mcpu', 'generic')}`), num-cores {s.target.get('num-cores', '?')}")
        st.caption(f"Session **{s.name}**: {len(s.actions)} actions")
        left, right = st.columns(2)
        left.button("Undo", key="undo", icon=":material/undo:", disabled=not s.actions, width="stretch",
                    on_click=_state.act, args=(lambda x: x.undo(), "undone"))
        right.button("Redo", key="redo", icon=":material/redo:", disabled=not s.redo_stack, width="stretch",
                     on_click=_state.act, args=(lambda x: x.redo(), "redone"))
        if (ms := st.session_state.get("last_action_ms")) is not None:
            st.caption(f"last action: propagated in {ms:.0f} ms")


PAGES = [
    st.Page("pages/graph.py", title="Graph", icon=":material/account_tree:", default=True),
    st.Page("pages/layouts.py", title="Layouts", icon=":material/grid_view:"),
    st.Page("pages/loops.py", title="Loops", icon=":material/loop:"),
    st.Page("pages/tuning.py", title="Tuning", icon=":material/speed:"),
    st.Page("pages/profile.py", title="Profile", icon=":material/monitoring:"),
    st.Page("pages/sessions.py", title="Sessions", icon=":material/save:"),
]

nav = st.navigation(PAGES)
sidebar()
nav.run()
