"""The Graph page's "New expression op" form: ops in index notation, typed as the
lines of a ``.expr`` file (``engine.ir.expr.source``), checked by the engine's reader on every
change of the text (an error in one line with its line and column; else each op's output shape
and FLOP count), and **Create model**, which opens a session on them as an imported ``.expr``
file does. The text is kept under the work folder by its hash (``store_model``, which the
Sessions page's upload uses too), so a reload or a replay finds it.

User text is only ever tokenized and parsed by the expression grammar, never evaluated as Python.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.engine.base.errors import GraphError
from workbench.engine.base.files import write_atomic
from workbench.engine.base.words import plural
from workbench.engine.ir.expr import expr_graph, read_expr
from workbench.engine.models import zoo
from workbench.engine.models.frontend import store_upload
from workbench.engine.session.session import new_session, replay
from workbench.app import state as _state
from workbench.app.messages import failure

__all__ = ["EXAMPLE", "MAX_EXPR_KB", "ExprCheck", "check_expr", "store_model", "expr_form"]

EXAMPLE = """\
# a strided convolution, then a ReLU times a bias per channel
input inp[1, 3, 9, 11]
input w[4, 3, 3, 3]
input b[4]
conv: out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]
act: out[n, k, y, x] = max(conv[n, k, y, x], 0) * b[k]
"""
#: a longer text is refused before it is parsed (a model of expression ops is a few lines)
MAX_EXPR_KB = 256
#: what the engine's messages call the form's text
_WHAT = "the text"


@dataclass(frozen=True)
class ExprCheck:
    """What the check of a text found: one row per op (its output shape and FLOPs), or the
    engine's one-line ``error`` with where it was found (``line``, ``column``: 0 when unknown)."""

    rows: tuple[dict, ...] = ()
    error: str = ""
    line: int = 0
    column: int = 0


def check_expr(text: str) -> ExprCheck:
    """Read and check ``text`` as a ``.expr`` file would be (``read_expr``, ``expr_graph``)."""
    if len(text.encode()) > MAX_EXPR_KB << 10:
        return ExprCheck(error=f"{_WHAT}: over {MAX_EXPR_KB} KB of text; a model of expression ops is a few lines")
    try:
        graph = expr_graph(read_expr(text, _WHAT), "check", what=_WHAT)
    except GraphError as e:  # ExprError names the line and column
        return ExprCheck(error=str(e), line=getattr(e, "line", 0), column=getattr(e, "column", 0))
    rows = []
    for n in graph.nodes:
        op = n.kwargs["expr"]
        rows.append({"op": n.name, "output shape": "x".join(map(str, op.out_shape)), "FLOPs": op.flops,
                     "kind": op.kind, "output": n.name in graph.outputs, "expression": str(op)})
    return ExprCheck(tuple(rows))


def store_model(filename: str, data: bytes, folder: str | Path) -> Path:
    """``store_upload`` with ``.expr`` files accepted too: ops that the engine reads and checks
    (``read_expr``, ``expr_graph``; refused before they are kept), kept in ``folder`` under a name
    with the content's hash, written atomically, so that a session pins them like any model file."""
    if Path(filename).suffix.lower() != ".expr":
        return store_upload(filename, data, folder)
    if len(data) > MAX_EXPR_KB << 10:
        raise GraphError(f"{filename} is {len(data) >> 10} KB, over the {MAX_EXPR_KB} KB limit for an .expr file")
    expr_graph(read_expr(data, "the file"), "check", what="the file")
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(filename).stem).lstrip("_.-")[:60] or "expr"
    path = Path(folder) / f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.expr"
    if not path.is_file() or path.read_bytes() != data:
        write_atomic(path, data)
    return path


@st.cache_data(show_spinner=False, max_entries=16)
def _checked(text: str) -> ExprCheck:  # every run of the Graph page draws the form
    return check_expr(text)


def _create() -> None:
    """Create model's click: a new session on the form's ops, the open one from now on (a refusal
    changes nothing and shows at the page's top). The text is the widget's as of the click."""
    ss = st.session_state
    try:
        path = store_model(f"{ss.expr_name.strip() or 'expr'}.expr", ss.expr_text.encode(), _state.WORK_DIR / "models")
        spec, graph = zoo.file_model(str(path))
        _state.open_session(replay(new_session(spec)),
                            f"created {path.stem}: {plural(len(graph.nodes), 'expression op')}, outputs "
                            f"{', '.join(f'{t} {tuple(graph.tensors[t].shape)}' for t in graph.outputs)}")
    except Exception as e:  # noqa: BLE001 - one line at the page's top, as every action's
        ss.error = failure(e, "Create model")


def _show(check: ExprCheck, text: str) -> None:
    if check.error:
        st.error(check.error, icon=":material/error:")
        lines = text.splitlines()
        if 0 < check.line <= len(lines) and check.column:  # the line, and a caret under the column
            st.code(f"{lines[check.line - 1]}\n{' ' * (check.column - 1)}^", language=None)
        return
    ops = pd.DataFrame(check.rows)
    st.dataframe(ops, hide_index=True, width="stretch", key="expr_ops")
    st.caption(f"valid: {plural(len(ops), 'op')}, {int(ops['FLOPs'].sum()):,} FLOPs in all")


def expr_form() -> None:
    """The form, in an expander: the text (kept while the tab lives, across page switches), its
    live check, a name and Create model."""
    ss = st.session_state
    with st.expander("New expression op", icon=":material/function:"):
        st.caption("One op a line, `name: out[i, j] += a[i, k] * w[k, j]` (`name[D1, ...]:` declares the output's "
                   "shape, else the accesses give it), one `input NAME[D1, ...]` line per input, weights included; "
                   "an op reads the inputs and ops above it. Indices are affine (`+ - *` by constants, `//` and `%`); "
                   "`=`, `+=` or `max=`; `+ - * /`, `exp`, `log`, `tanh`, `sigmoid`, `max`, `min`, `where`.")
        if "expr_text" not in ss:  # a page switch drops a widget's value: the draft brings it back
            ss.expr_text = ss.get("expr_draft", EXAMPLE)
        text = st.text_area("Ops and inputs", key="expr_text", height=170)
        ss.expr_draft = text
        check = _checked(text)
        _show(check, text)
        if "expr_name" not in ss:
            ss.expr_name = "expr"
        st.text_input("Model name", key="expr_name", max_chars=60)
        lost = _state.unsaved()
        keep = not lost or st.checkbox(f"Discard this session's {plural(lost, 'unsaved action')}", key="expr_discard")
        st.button("Create model", key="expr_create", icon=":material/add_circle:", type="primary",
                  disabled=bool(check.error) or not keep, on_click=_create,
                  help="A new session on these ops, as an imported .expr file (the file is kept in the work folder).")
