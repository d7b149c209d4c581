"""Expression ops (after NeoFlow): operators written in index notation, such as
``out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]``, parsed by a small grammar
(``parser``; never Python's ``eval``), checked against their input shapes (``define``), defined in
TE (``compute``), computed by a NumPy interpreter as their reference (``interp``) and registered
in the op library (``op``); ``source`` reads ``.expr`` model files. ``grad`` derives each input's
gradient as expression ops (``solve``: the index system), ``backward`` a whole graph's."""

from .backward import backward_graph
from .define import ExprOp, define
from .grad import Gradient, gradient
from .interp import evaluate
from .lexer import ExprError
from .op import add_expr_op
from .parser import parse
from .source import ExprFile, expr_graph, read_expr

__all__ = ["ExprError", "ExprFile", "ExprOp", "Gradient", "add_expr_op", "backward_graph", "define", "evaluate",
           "expr_graph", "gradient", "parse", "read_expr"]
