"""``python -m workbench.app``: ``streamlit run`` on the entry script, with the engine imported in a
thread meanwhile, so that a tab opened later does not wait for TVM and PyTorch to import.

The thread waits first for a tab that opens at once (``make run`` and a browser at the ready):
the import takes most of two cores' time for seconds and would hold back that tab's first view
(``first_view``); once the view is drawn, the tab's own run imports the engine."""

from __future__ import annotations

import threading
from pathlib import Path

#: seconds the warm-up waits for a first tab to start before it imports the engine anyway
GRACE_S = 2.0


def warm_up(grace_s: float = 0.0) -> None:
    """Import what the first page needs and run it once on the default model (LLVM's CPU name,
    the layered layout), so a tab opened afterwards finds it all done; first wait ``grace_s``
    seconds at most for a tab to start. Errors are left to the page: it imports and runs the
    same code and shows them."""
    from workbench.app.first_view import TAB_STARTED

    TAB_STARTED.wait(grace_s)
    try:
        from workbench.app.startup import import_engine

        import_engine()
        from workbench.engine.session.session import new_session, replay
        from workbench.engine.build.targets import cpu_name, resolve_target
        from workbench.engine.models.zoo import DEFAULT_MODEL
        from workbench.viz.graph import graph_figure

        state = replay(new_session(DEFAULT_MODEL))
        resolve_target(state.session.target), cpu_name()
        graph_figure(state.graph, state.program.plan)
    except Exception:  # noqa: BLE001 - see above
        pass


def serve(args: list[str]) -> None:
    """``streamlit run`` the entry script (``main.py``) with ``args``, warming up in a thread meanwhile."""
    from streamlit.web import cli

    threading.Thread(target=warm_up, args=(GRACE_S,), name="warm-up", daemon=True).start()
    cli.main(["run", str(Path(__file__).with_name("main.py")), *args], prog_name="streamlit")
