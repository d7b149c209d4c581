"""The Graph page's New expression op form (``app/expr_form.py``): the live check shows each op's
shape and FLOPs or the engine's positioned error, Python in the text is a parse error and never
runs, Create model opens a session on the ops that the other pages and a reload see, and the
Sessions page's upload takes ``.expr`` files."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import graph_labels, session, start
from workbench.app.expr_form import EXAMPLE, MAX_EXPR_KB, check_expr, store_model
from workbench.engine.base.errors import GraphError

MATMUL = """input a[4, 6]
input w[6, 5]
input bias[5]
mm: out[i, j] += a[i, k] * w[k, j]
relu[4, 5]: out[i, j] = max(mm[i, j], 0) + bias[j]
"""


def _ops(at: AppTest) -> pd.DataFrame:
    """The check's table of ops (the form's only table with a FLOPs column)."""
    tables = [d.value for d in at.dataframe if "FLOPs" in d.value.columns]
    assert len(tables) == 1, [e.value for e in at.error]
    return tables[0].set_index("op")


def _type(at: AppTest, text: str) -> AppTest:
    at.text_area(key="expr_text").input(text).run()
    assert not at.exception, at.exception
    return at


def test_a_valid_text_shows_each_ops_shape_and_flops(at):
    """The example the form opens with, then another text: each op's output shape and its FLOPs
    (per point of its iteration space, one per arithmetic operation and function, one for the
    reduction), the total in the caption."""
    assert at.text_area(key="expr_text").value == EXAMPLE
    ops = _ops(at)
    # conv: 1x4x4x5 outputs, 3x3x3 taps each, a multiply and an add; act: a max and a multiply
    assert ops.loc["conv", "output shape"] == "1x4x4x5" and ops.loc["conv", "FLOPs"] == 80 * 27 * 2
    assert ops.loc["act", "output shape"] == "1x4x4x5" and ops.loc["act", "FLOPs"] == 80 * 2
    assert list(ops["output"]) == [False, True] and list(ops["kind"]) == ["complex", "elementwise"]
    assert any(c.value == "valid: 2 ops, 4,480 FLOPs in all" for c in at.caption)

    ops = _ops(_type(at, MATMUL))
    assert ops.loc["mm", "output shape"] == "4x5" and ops.loc["mm", "FLOPs"] == 20 * 6 * 2
    assert ops.loc["relu", "output shape"] == "4x5" and ops.loc["relu", "FLOPs"] == 20 * 2
    assert not at.error and not at.button(key="expr_create").disabled


@pytest.mark.parametrize("text, error, caret", [
    ("input a[4]\nx: out[i] = a[i] $ 2\n", "line 2, column 18: the text: unexpected character '$'", 17),
    ("input a[4]\ninput b[5]\nx: out[i] = a[i] + b[i]\n",
     "line 3, column 15: the text: op x: index i has inconsistent extents: 4 from a (dim 0: i), 5 from b (dim 0: i)", 14),
    (MATMUL + "bad: out[i] = mm[i, j * k]\n",
     "line 6, column 23: the text: op bad: an index is multiplied by constants only (j * k multiplies two indices)", 22),
])
def test_a_bad_text_shows_the_engines_error_at_its_line_and_column(at, text, error, caret):
    """One line with the engine's message, the line it names with a caret under the column, no
    table, and Create model disabled."""
    _type(at, text)
    assert [e.value for e in at.error] == [error]
    line = text.splitlines()[int(error.split(",")[0].removeprefix("line ")) - 1]
    assert [c.value for c in at.code if c.value.endswith("^")] == [f"{line}\n{' ' * caret}^"]
    assert not [d for d in at.dataframe if "FLOPs" in d.value.columns]
    assert at.button(key="expr_create").disabled


def test_python_in_the_form_is_a_parse_error_and_nothing_runs(at, monkeypatch, tmp_path):
    """The text is tokenized and parsed by the expression grammar only: Python calls are parse
    errors, on the form and on the way to a file, and never run."""
    calls = []
    monkeypatch.setattr(os, "system", lambda cmd: calls.append(cmd) or 0)
    before = session(at).to_json()
    _type(at, "input a[4]\nx: out[i] = __import__('os').system('x')\n")
    assert [e.value for e in at.error] == ["line 2, column 24: the text: unexpected character \"'\""]
    assert at.button(key="expr_create").disabled
    _type(at, "input a[4]\nx: out[i] = __import__(a[i])\n")
    assert [e.value for e in at.error][0].startswith("line 2, column 13: the text: op x: unknown function '__import__'")
    _type(at, MATMUL)  # valid: then the text changes and Create model is clicked at once, as a browser may send
    at.text_area(key="expr_text").input("input a[4]\nx: out[i] = __import__('os').system('x')\n")
    at.button(key="expr_create").click().run()
    assert [e.value for e in at.error][0] == "Create model: line 2, column 24: the file: unexpected character \"'\""
    with pytest.raises(GraphError, match="unexpected character"):
        store_model("x.expr", b"input a[4]\nx: out[i] = __import__('os').system('x')\n", tmp_path / "kept")
    assert calls == [] and session(at).to_json() == before and not (tmp_path / "kept").exists()


def test_create_model_opens_the_ops_as_the_session_that_other_pages_and_a_reload_see(at):
    """Create model: a new session on the file the text was kept in; the graph draws its ops, the
    Loops page lists its kernel (and the form keeps its text over the page switch), and a reload
    of the tab opens it again."""
    from workbench.app import state as _state

    _type(at, MATMUL)
    at.text_input(key="expr_name").input("my mlp").run()
    at.button(key="expr_create").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    model = session(at).model
    stored = Path(model["file"])
    assert stored.parent == _state.WORK_DIR / "models" and stored.read_text() == MATMUL
    assert stored.name.startswith("my_mlp-") and model["inputs"] == {"a": [4, 6], "w": [6, 5], "bias": [5]}
    graph = at.session_state["state"].graph
    assert [(n.name, n.type) for n in graph.nodes] == [("mm", "expr_complex"), ("relu", "expr_elementwise")]
    assert any(s.value.startswith(f"created {stored.stem}: 2 expression ops, outputs relu (4, 5)") for s in at.success)
    assert "mm" in graph_labels(at) and "relu" in graph_labels(at)  # the drawn edges name the ops' tensors

    at.switch_page("../pages/loops.py").run()
    assert not at.exception, at.exception
    kernels = at.selectbox(key="loop_kernel").options
    assert any(k.startswith("mm ") and "mm → relu" in k for k in kernels), kernels
    at.switch_page("../pages/graph.py").run()  # a page switch drops widget values: the form's text comes back
    assert at.text_area(key="expr_text").value == MATMUL

    again = start({"ws": at.query_params["ws"]})  # a reload
    assert session(again) == session(at) and again.session_state["state"].graph.nodes == graph.nodes


def test_the_sessions_upload_takes_an_expr_file(at, monkeypatch):
    """An uploaded .expr file opens as an imported model; one that does not read is refused in
    one line with its position, and nothing changes."""
    import streamlit

    from workbench.app import state as _state

    class Upload:
        name = "net.expr"
        data = b"input a[4]\nx: out[i] = exp(a[i]) +\n"

        def getvalue(self) -> bytes:
            return self.data

    monkeypatch.setattr(streamlit, "file_uploader",
                        lambda *args, key=None, **kwargs: Upload() if key == "model_upload" else None)
    before = session(at).to_json()
    at.switch_page("../pages/sessions.py").run()
    at.button(key="import_model").click().run()
    assert [e.value for e in at.error] == ["net.expr: line 2, column 24: the file: op x: expected a value (a number, an index, a tensor "
                                           "element such as a[i], a function call or '('), got the end"]
    assert session(at).to_json() == before and not (Path(_state.WORK_DIR) / "models").exists()
    Upload.data = MATMUL.encode()
    at.button(key="import_model").click().run()
    assert not at.error, [e.value for e in at.error]
    assert Path(session(at).model["file"]).read_bytes() == Upload.data
    assert [n.name for n in at.session_state["state"].graph.nodes] == ["mm", "relu"]


def test_the_check_and_the_store_refuse_oversized_text(tmp_path):
    big = "# " + "x" * (MAX_EXPR_KB << 10) + "\n" + MATMUL
    assert check_expr(big).error.startswith(f"the text: over {MAX_EXPR_KB} KB")
    with pytest.raises(GraphError, match=f"over the {MAX_EXPR_KB} KB limit"):
        store_model("big.expr", big.encode(), tmp_path)
    assert not list(tmp_path.iterdir())
    first = store_model("m.expr", MATMUL.encode(), tmp_path)
    assert store_model("m.expr", MATMUL.encode(), tmp_path) == first and len(list(tmp_path.iterdir())) == 1
