"""Tokens of the expression language, and its error: every error names the column (1-based) it
was found at, so a form can point at it.

>>> [t.text for t in tokenize("out[i] max= a[i, 2*j] // 3")]
['out', '[', 'i', ']', 'max=', 'a', '[', 'i', ',', '2', '*', 'j', ']', '//', '3', '']
>>> tokenize("a[i] = b[i] $ 2")
Traceback (most recent call last):
...
workbench.engine.ir.expr.lexer.ExprError: column 13: unexpected character '$'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...base.errors import GraphError

__all__ = ["ExprError", "Token", "tokenize"]


class ExprError(GraphError):
    """An expression that does not parse or does not fit its tensors; ``column`` (1-based, 0
    when the error concerns the whole op) and, in a file, ``line`` are where it was found."""

    def __init__(self, message: str, column: int = 0, line: int = 0) -> None:
        where = ", ".join(f"{k} {v}" for k, v in (("line", line), ("column", column)) if v)
        super().__init__(f"{where}: {message}" if where else message, reason=message)
        self.column, self.line = column, line


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "name" | "int" | "float" | "op" | "end"
    text: str
    column: int  # 1-based

    def describe(self) -> str:
        return "the end" if self.kind == "end" else repr(self.text)


# longest operators first: "//" is not two "/"; "max=" (the reduction) is one token, "max(" a call
_OPS = ("max=", "+=", "//", "<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "<", ">", "=",
        "(", ")", "[", "]", ",", ":")
# ASCII only: names become TVM buffer and file names
_TOKEN = re.compile(r"(?P<space>\s+)|(?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?)"
                    r"|(?P<int>\d+)|(?P<op>" + "|".join(re.escape(o) for o in _OPS) + r")|(?P<name>[A-Za-z_]\w*)",
                    re.ASCII)


def tokenize(text: str, start_column: int = 1) -> list[Token]:
    """The tokens of ``text``, ending with an ``end`` token; ``start_column`` is the column of its
    first character (a line's expression after ``name:``)."""
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        col = start_column + pos
        if m is None:
            raise ExprError(f"unexpected character {text[pos]!r}", col)
        if m.lastgroup != "space":
            out.append(Token(m.lastgroup, m.group(), col))
        pos = m.end()
    out.append(Token("end", "", start_column + len(text)))
    return out
