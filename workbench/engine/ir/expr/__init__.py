"""Expression ops (issue #47, after NeoFlow): operators written in index notation, such as
``out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]``, parsed by a small grammar
(``parser``; never Python's ``eval``), checked against their input shapes (``define``), defined in
TE (``compute``), computed by a NumPy interpreter as their reference (``interp``) and registered
in the op library (``op``); ``source`` reads ``.expr`` model files."""

from .define import ExprOp, define
from .interp import evaluate
from .lexer import ExprError
from .op import add_expr_op
from .parser import parse
from .source import ExprFile, expr_graph, read_expr

__all__ = ["ExprError", "ExprFile", "ExprOp", "add_expr_op", "define", "evaluate", "expr_graph", "parse", "read_expr"]
