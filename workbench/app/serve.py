"""``python -m workbench.app``: ``streamlit run`` on the entry script, with the engine imported in a
thread meanwhile, so that the first tab does not wait for TVM and PyTorch to import."""

from __future__ import annotations

import threading
from pathlib import Path


def warm_up() -> None:
    """Import what the first page needs and run it once on the default model (LLVM's CPU name,
    the layered layout), so a tab opened afterwards finds it all done. Errors are left to the
    page: it imports and runs the same code and shows them."""
    try:
        from workbench.engine.session.session import new_session, replay
        from workbench.engine.build.targets import cpu_name, resolve_target
        from workbench.engine.models.zoo import DEFAULT_MODEL
        from workbench.app import state as _state  # noqa: F401
        from workbench.app.first_view import ENGINE_READY
        from workbench.viz.graph import graph_figure

        state = replay(new_session(DEFAULT_MODEL))
        resolve_target(state.session.target), cpu_name()
        graph_figure(state.graph, state.program.plan)
        ENGINE_READY.set()
    except Exception:  # noqa: BLE001 - see above
        pass


def serve(args: list[str]) -> None:
    """``streamlit run`` the entry script (``main.py``) with ``args``, warming up in a thread meanwhile."""
    from streamlit.web import cli

    threading.Thread(target=warm_up, name="warm-up", daemon=True).start()
    cli.main(["run", str(Path(__file__).with_name("main.py")), *args], prog_name="streamlit")
