"""Symbolic derivatives of an expression's value with respect to one of its reads, as trees of
the language (``None`` stands for zero, so that products with it vanish as they are built).

Whole-number parts (indices) and conditions have no derivative; ``max``/``min``/``where`` pass
it to the side they take (a tie goes to the first argument); the results of ``exp``, ``tanh``
and ``sigmoid`` are reused in their own derivatives.

>>> from workbench.engine.ir.expr.parser import parse_node
>>> x = parse_node("a[i]")
>>> print(derivative(parse_node("tanh(a[i]) * b[i] + max(a[i], 0)"), x))
(1.0 - tanh(a[i]) * tanh(a[i])) * b[i] + where(a[i] >= 0, 1.0, 0.0)
"""

from __future__ import annotations

from .check import kind_of
from .nodes import Access, Binary, Call, Node, Num, Unary

__all__ = ["derivative", "add", "mul", "sub", "div", "neg", "ONE"]

ONE = Num(1.0)


def _is(node: Node | None, value: float) -> bool:
    return isinstance(node, Num) and node.value == value


def add(a: Node | None, b: Node | None) -> Node | None:
    if a is None:
        return b
    return a if b is None else Binary("+", a, b)


def neg(a: Node | None) -> Node | None:
    if a is None:
        return None
    return a.x if isinstance(a, Unary) and a.op == "-" else Unary("-", a)


def sub(a: Node | None, b: Node | None) -> Node | None:
    if b is None:
        return a
    return neg(b) if a is None else Binary("-", a, b)


def mul(a: Node | None, b: Node | None) -> Node | None:
    if a is None or b is None:
        return None
    return b if _is(a, 1) else a if _is(b, 1) else Binary("*", a, b)


def div(a: Node | None, b: Node) -> Node | None:
    return None if a is None else Binary("/", a, b)


def _where(cond: Node, a: Node | None, b: Node | None) -> Node | None:
    if a is None and b is None:
        return None
    return Call("where", (cond, a or Num(0.0), b or Num(0.0)))


def derivative(node: Node, read: Access) -> Node | None:
    """d ``node`` / d ``read`` (every occurrence of the read counts)."""
    if isinstance(node, Access):
        return ONE if node == read else None
    if isinstance(node, Num) or kind_of(node) != "value":
        return None
    if isinstance(node, Unary):
        return neg(derivative(node.x, read))
    if isinstance(node, Binary):
        da, db = derivative(node.a, read), derivative(node.b, read)
        if node.op in ("+", "-"):
            return add(da, db) if node.op == "+" else sub(da, db)
        if node.op == "*":
            return add(mul(da, node.b), mul(node.a, db))
        # (a / b)' = a' / b - a * b' / (b * b)
        return sub(div(da, node.b), div(mul(node.a, db), Binary("*", node.b, node.b)))
    args = node.args
    if node.fn == "where":
        return _where(args[0], derivative(args[1], read), derivative(args[2], read))
    if node.fn in ("max", "min"):
        cond = Binary(">=" if node.fn == "max" else "<=", args[0], args[1])
        return _where(cond, derivative(args[0], read), derivative(args[1], read))
    d = derivative(args[0], read)
    if node.fn == "exp":
        return mul(d, node)
    if node.fn == "log":
        return div(d, args[0])
    if node.fn == "tanh":
        return mul(d, Binary("-", ONE, Binary("*", node, node)))
    return mul(d, Binary("*", node, Binary("-", ONE, node)))  # sigmoid
