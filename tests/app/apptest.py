"""AppTest helpers shared by the page tests: start the app, read the graph, run the sidebar."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "workbench" / "app" / "main.py")


def start(query: dict | None = None) -> AppTest:
    """The app in a new tab (``query``: the URL's query parameters, e.g. a workspace id)."""
    app = AppTest.from_file(APP, default_timeout=180)
    app.query_params.update(query or {})
    app.run()
    assert not app.exception, app.exception
    return app


def graph_labels(app: AppTest) -> str:
    """The text of the graph figure's edge labels (tensor, shape, layout)."""
    fig = json.loads(app.get("plotly_chart")[0].proto.spec)
    return " ".join(a.get("text", "") for a in fig["layout"].get("annotations", []))


def home(app: AppTest) -> AppTest:
    """Run the entry script (with its sidebar) again: after its first run, AppTest reruns the
    current page's script alone, and only a switch back to ``app.py`` runs the entry script."""
    return app.switch_page("../pages/graph.py").run().switch_page("../pages/graph.py").run()


def preset_form(app: AppTest) -> AppTest:
    """The Layouts page with its Preset tab open (the page draws the open tab alone)."""
    app.session_state["layout_tab"] = "Preset"
    return app.switch_page("../pages/layouts.py").run()


def session(app: AppTest):
    return app.session_state["state"].session


def tune_loops(app: AppTest, model: str = "c1d", budget: int = 2):
    """Start the loop-only stage with ``budget`` measurements on ``model`` from the Tuning page;
    returns the job once it is no longer running."""
    home(app).selectbox(key="model_pick").set_value(model).run()
    app.switch_page("../pages/tuning.py").run()
    app.radio(key="tune_stage").set_value("loop").run()
    app.number_input(key="tune_budget").set_value(budget).run()
    app.button(key="tune_start").click().run()
    job = app.session_state["tune_job"]
    job.wait(timeout=240)
    return job


def record_pushes(monkeypatch) -> tuple[list, list]:
    """From now on, every ``State.push`` as ``(base, step, new state or None if refused)`` and
    every full ``replay``'s session, in the order they happen."""
    from workbench.engine.base.errors import WorkbenchError
    from workbench.engine.session import session as S

    pushes, replays = [], []
    real_push, real_replay = S.State.push, S.replay

    def push(self, step):
        try:
            new = real_push(self, step)
        except WorkbenchError:
            pushes.append((self, step, None))
            raise
        pushes.append((self, step, new))
        return new

    monkeypatch.setattr(S.State, "push", push)
    monkeypatch.setattr(S, "replay", lambda s: replays.append(s) or real_replay(s))
    return pushes, replays


def click_reuses_the_preview(app: AppTest, button: str, pushes: list, replays: list) -> None:
    """Click ``button`` (an Apply below a preview) and check that the tab's state is the last
    run's preview push itself, and that the run after it pushed on that state only (its own
    preview) and replayed nothing."""
    base, step, preview = pushes[-1]
    assert preview is not None and base is app.session_state["state"], "the last run previewed a push"
    pushes.clear()
    app.button(key=button).click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    assert app.session_state["state"] is preview  # the click did no work of its own
    assert app.session_state["state"].session.steps[-1] == step
    assert [b for b, _, _ in pushes] == [preview] * len(pushes) and len(pushes) <= 1, pushes
    assert replays == []


def fill_split(app: AppTest, factors: str) -> AppTest:
    """The Layouts page's primitive form: split dim 1 of conv by ``factors``."""
    app.switch_page("../pages/layouts.py").run()
    app.selectbox(key="layout_key").set_value("conv").run()
    app.selectbox(key="layout_prim").set_value("split").run()
    app.selectbox(key="lp_split_dim").set_value(1).run()
    return app.text_input(key="lp_split_factors_64").input(factors).run()


def upload_model(monkeypatch, name: str, data: bytes) -> None:
    """The model uploader returns this file (AppTest cannot upload); the session uploader nothing."""
    import streamlit

    class Upload:
        def getvalue(self) -> bytes:
            return data

    Upload.name = name
    monkeypatch.setattr(streamlit, "file_uploader",
                        lambda *args, key=None, **kwargs: Upload() if key == "model_upload" else None)
