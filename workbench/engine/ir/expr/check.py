"""What each part of an expression is (an index, a value or a condition), and the rules of
indices: (quasi-)affine, so that they stay analysable (``+ - *`` by constants, ``//`` and ``%``
by positive constants). A whole number where a value is wanted is one (``max(a[i], 0)``, ``i / 2``).

>>> from workbench.engine.ir.expr.parser import parse_node
>>> kind_of(parse_node("2*i + r // 3")), kind_of(parse_node("a[i] * i")), kind_of(parse_node("i % 2 == 0"))
('index', 'value', 'bool')
>>> kind_of(parse_node("i * j"))
Traceback (most recent call last):
...
workbench.engine.ir.expr.lexer.ExprError: column 3: an index is multiplied by constants only (i * j multiplies two indices)
"""

from __future__ import annotations

from .lexer import ExprError
from .nodes import COMPARISONS, Access, Binary, Call, Name, Node, Num, Unary, first_column, walk

__all__ = ["kind_of", "check_index", "is_constant", "constant_value"]


def is_constant(node: Node) -> bool:
    """Whether ``node`` is a whole-number expression with no index in it."""
    return all(isinstance(n, (Num, Unary, Binary)) and not (isinstance(n, Num) and isinstance(n.value, float))
               for n in walk(node))


def constant_value(node: Node) -> int:
    """The value of a constant index expression (``is_constant``)."""
    if isinstance(node, Num):
        return int(node.value)
    if isinstance(node, Unary):
        return -constant_value(node.x)
    a, b = constant_value(node.a), constant_value(node.b)
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0, "%": a % b if b else 0}[node.op]


def check_index(node: Node, where: str) -> None:
    """Refuse ``node`` as the index ``where`` (e.g. "index 2 of inp") unless it is one."""
    if kind_of(node) != "index":
        raise ExprError(f"{where} must be a whole number made of indices and integer constants, got {node}",
                        first_column(node))


def kind_of(node: Node) -> str:
    """``"index"``, ``"value"`` or ``"bool"``; raises ``ExprError`` where the parts do not fit."""
    if isinstance(node, Num):
        return "value" if isinstance(node.value, float) else "index"
    if isinstance(node, Name):
        return "index"
    if isinstance(node, Access):
        for k, idx in enumerate(node.indices):
            check_index(idx, f"index {k} of {node.tensor}")
        return "value"
    if isinstance(node, Unary):
        inner = kind_of(node.x)
        if node.op == "not":
            _need_bool(node.x, inner, "not")
            return "bool"
        _need_number(node.x, inner, "-")
        return inner
    if isinstance(node, Call):
        kinds = [kind_of(a) for a in node.args]
        for k, (a, kind) in enumerate(zip(node.args, kinds)):
            if node.fn == "where" and k == 0:
                _need_bool(a, kind, "where's condition")
            else:
                _need_number(a, kind, f"{node.fn}()")
        return "value"
    return _binary(node)


def _binary(node: Binary) -> str:
    a, b = kind_of(node.a), kind_of(node.b)
    if node.op in ("and", "or"):
        _need_bool(node.a, a, node.op)
        _need_bool(node.b, b, node.op)
        return "bool"
    _need_number(node.a, a, node.op)
    _need_number(node.b, b, node.op)
    if node.op in COMPARISONS:
        return "bool"
    if node.op in ("//", "%"):
        if a == "value" or b == "value":
            raise ExprError(f"{node.op} applies to indices only (whole numbers), not to the value in {node}",
                            node.column)
        if not is_constant(node.b) or constant_value(node.b) <= 0:
            raise ExprError(f"{node.op} divides an index by a positive integer constant only, not by {node.b}",
                            node.b.column or node.column)
        return "index"
    if node.op == "/" or a == "value" or b == "value":
        return "value"
    if node.op == "*" and not (is_constant(node.a) or is_constant(node.b)):
        raise ExprError(f"an index is multiplied by constants only ({node} multiplies two indices)", node.column)
    return "index"


def _need_bool(node: Node, kind: str, what: str) -> None:
    if kind != "bool":
        raise ExprError(f"{what} needs a condition (a comparison such as a[i] > 0), got {node}", first_column(node))


def _need_number(node: Node, kind: str, what: str) -> None:
    if kind == "bool":
        raise ExprError(f"{what} needs a number, got the condition {node} (use where(condition, a, b))",
                        first_column(node))
