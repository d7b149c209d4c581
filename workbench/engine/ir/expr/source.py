"""``.expr`` model files: a graph of expression ops as text, one line each::

    # a strided conv, then a ReLU with a bias (comments and blank lines are allowed)
    input inp[1, 3, 9, 11]
    input w[4, 3, 3, 3]
    input b[4]
    conv: out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]
    act[1, 4, 4, 5]: out[n, k, y, x] = max(conv[n, k, y, x], 0) * b[k]

``input NAME[D1, ...]`` declares a graph input (weights are inputs too); ``NAME: expression``
defines op NAME (``out`` is the expression's own name for its output), and ``NAME[D1, ...]:``
declares its output's shape instead of inferring it. An op reads inputs and ops defined above
it. The graph's outputs are the ops no other op reads. Errors name the line and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..graph import Graph, GraphBuilder
from .lexer import ExprError, Token, tokenize
from .op import add_expr_op
from .parser import KEYWORDS

__all__ = ["ExprFile", "OpLine", "read_expr", "expr_graph", "MAX_RANK"]

#: dims of a tensor at most (a session's file model takes inputs of 1 to 8 dims)
MAX_RANK = 8


@dataclass(frozen=True)
class OpLine:
    name: str
    shape: tuple[int, ...] | None
    text: str  # the expression
    line: int
    column: int  # of the expression's first character


@dataclass(frozen=True)
class ExprFile:
    """A parsed ``.expr`` file: its inputs (name -> shape) and its op lines, not yet checked
    against each other (``expr_graph`` does that)."""

    inputs: Mapping[str, tuple[int, ...]]
    ops: tuple[OpLine, ...]
    #: a ``train P1, P2 [lr X]`` line: the inputs an SGD training step learns (empty: a model only)
    train: tuple[str, ...] = ()
    lr: float = 0.1


def read_expr(text: str | bytes, what: str = "the file") -> ExprFile:
    """Split an ``.expr`` file into inputs and op lines; raises ``ExprError`` (with its line)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ExprError(f"{what} is not UTF-8 text (byte {e.start}): an .expr file is text") from None
    inputs: dict[str, tuple[int, ...]] = {}
    ops: list[OpLine] = []
    names: set[str] = set()
    train: tuple[tuple[str, ...], float] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0]
        if not body.strip():
            continue
        try:
            toks = tokenize(body)
            if toks[0].text == "train" and toks[1].text not in (":", "["):  # an op may be named train
                if train is not None:
                    raise ExprError("a second train line (one names every parameter)", toks[0].column)
                train = _train_line(toks)
                continue
            if toks[0].text == "input" and toks[1].kind == "name":
                name, shape, end = _declaration(toks, 1, "input")
                if toks[end].kind != "end":
                    raise ExprError(f"expected the end of the line after input {name}[...], got "
                                    f"{toks[end].describe()}", toks[end].column)
                inputs[name] = shape
            else:
                name, shape, end = _declaration(toks, 0, "op")
                if toks[end].text != ":" or toks[end].kind != "op":
                    raise ExprError(f"expected ':' after the op's name {name} (a line is `input NAME[D1, ...]` or "
                                    f"`NAME: expression`), got {toks[end].describe()}", toks[end].column)
                col = toks[end].column + 1
                ops.append(OpLine(name, shape, body[col - 1:], n, col))
            if name in names:
                raise ExprError(f"{name} is defined twice", toks[0].column)
            names.add(name)
        except ExprError as e:
            raise ExprError(f"{what}: {e.reason}", e.column, n) from None
    if not ops:
        raise ExprError(f"{what} defines no op (a line NAME: out[i, ...] = ...)")
    return ExprFile(inputs, tuple(ops)) if train is None else ExprFile(inputs, tuple(ops), *train)


def _train_line(toks: list[Token]) -> tuple[tuple[str, ...], float]:
    """``train P1, P2, ... [lr X]``: the parameters and the learning rate (0.1 when not given)."""
    params, k = [], 1
    while True:
        tok = toks[k]
        if tok.kind != "name" or tok.text in KEYWORDS or tok.text == "lr":
            raise ExprError(f"expected a parameter's name after train, got {tok.describe()}", tok.column)
        params.append(tok.text)
        if toks[k + 1].text != ",":
            break
        k += 2
    lr, end = 0.1, toks[k + 1]
    if end.text == "lr":
        value = toks[k + 2]
        if value.kind not in ("int", "float") or float(value.text) <= 0:
            raise ExprError(f"expected a positive learning rate after lr, got {value.describe()}", value.column)
        lr, end = float(value.text), toks[k + 3]
    if end.kind != "end":
        raise ExprError(f"expected ',', lr or the end of the train line, got {end.describe()}", end.column)
    return tuple(params), lr


def _declaration(toks: list[Token], at: int, what: str) -> tuple[str, tuple[int, ...] | None, int]:
    """``NAME`` or ``NAME[D1, ...]`` from token ``at``: the name, the shape (None when not given:
    an input must give one) and the index of the next token."""
    tok = toks[at]
    if tok.kind != "name" or tok.text in KEYWORDS:
        raise ExprError(f"expected the {what}'s name, got {tok.describe()}", tok.column)
    if toks[at + 1].text != "[":
        if what == "input":
            raise ExprError(f"expected '[' and the shape of input {tok.text}, got {toks[at + 1].describe()}",
                            toks[at + 1].column)
        return tok.text, None, at + 1
    dims, k = [], at + 2
    while True:
        d = toks[k]
        if d.kind != "int" or int(d.text) < 1:
            raise ExprError(f"expected a positive whole dim of {tok.text}'s shape, got {d.describe()}", d.column)
        dims.append(int(d.text))
        sep = toks[k + 1]
        if sep.text == "]":
            break
        if sep.text != ",":
            raise ExprError(f"expected ',' or ']' in {tok.text}'s shape, got {sep.describe()}", sep.column)
        k += 2
    if len(dims) > MAX_RANK:
        raise ExprError(f"{tok.text} has {len(dims)} dims; at most {MAX_RANK}", tok.column)
    return tok.text, tuple(dims), k + 2


def expr_graph(source: ExprFile, name: str, doc: str = "", inputs: Mapping[str, Sequence[int]] | None = None,
               what: str = "the file") -> Graph:
    """The graph of a read ``.expr`` file (``inputs``: the shapes to use, by default the file's);
    every op is checked (``define``), an error names its line and column."""
    b = GraphBuilder(name)
    for t, shape in source.inputs.items():
        b.input(t, tuple((inputs or {}).get(t, shape)))
    for ln in source.ops:
        try:
            add_expr_op(b, ln.name, ln.text, ln.shape, ln.column)
        except ExprError as e:
            raise ExprError(f"{what}: op {ln.name}: {e.reason}", e.column, ln.line) from None
    read = {i for n in b.nodes for i in n.inputs}
    if unused := [t for t in source.inputs if t not in read]:
        raise ExprError(f"{what}: input {unused[0]} is read by no op")
    return b.build(doc=doc)

