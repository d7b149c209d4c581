"""One evaluator of an expression tree for every kind of number it runs on: Python ints (index
ranges), NumPy arrays (the reference interpreter, ``NumPyBackend``) and TVM ``PrimExpr`` (the TE
compute).

Indices are folded with Python's operators, which mean the same on all three (``//`` and ``%``
floor on NumPy and on TVM's ``floordiv``/``floormod``); values go through a ``Backend`` that
says how a number, an element, a function and a comparison are made.

>>> import numpy as np
>>> from workbench.engine.ir.expr.parser import parse_node
>>> fold_index(parse_node("2*y + r // 3 - 1"), {"y": np.arange(3), "r": 4}).tolist()
[0, 2, 4]
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

import numpy as np

from .check import kind_of
from .nodes import COMPARISONS, Access, Call, Name, Node, Num, Unary

__all__ = ["Backend", "NumPyBackend", "fold_index", "fold_value"]


class Backend(Protocol):
    def const(self, value: float) -> Any: ...

    def cast(self, index: Any) -> Any: ...

    def access(self, node: Access, indices: list[Any]) -> Any: ...

    def call(self, node: Call, args: list[Any]) -> Any: ...

    def compare(self, op: str, a: Any, b: Any) -> Any: ...

    def logic(self, op: str, args: list[Any]) -> Any: ...


def fold_index(node: Node, env: Mapping[str, Any]) -> Any:
    """An index expression (``check.kind_of(node) == "index"``) with its names from ``env``."""
    if isinstance(node, Num):
        return int(node.value)
    if isinstance(node, Name):
        return env[node.name]
    if isinstance(node, Unary):
        return -fold_index(node.x, env)
    a, b = fold_index(node.a, env), fold_index(node.b, env)
    if node.op == "+":
        return a + b
    if node.op == "-":
        return a - b
    if node.op == "*":
        return a * b
    return a // b if node.op == "//" else a % b


def fold_value(node: Node, env: Mapping[str, Any], be: Backend) -> Any:
    """A value or condition: whole-number parts are folded as indices, then cast where a value
    is wanted (``check``'s rules say where)."""
    kind = kind_of(node)
    if kind == "index":
        return be.cast(fold_index(node, env))
    if isinstance(node, Num):
        return be.const(float(node.value))
    if isinstance(node, Access):
        return be.access(node, [fold_index(i, env) for i in node.indices])
    if isinstance(node, Call):
        return be.call(node, [fold_value(a, env, be) for a in node.args])
    if isinstance(node, Unary):
        x = fold_value(node.x, env, be)
        return be.logic("not", [x]) if node.op == "not" else -x
    if node.op in ("and", "or"):
        return be.logic(node.op, [fold_value(node.a, env, be), fold_value(node.b, env, be)])
    if node.op in COMPARISONS:
        if kind_of(node.a) == kind_of(node.b) == "index":  # compared as whole numbers
            return be.compare(node.op, fold_index(node.a, env), fold_index(node.b, env))
        return be.compare(node.op, fold_value(node.a, env, be), fold_value(node.b, env, be))
    a, b = fold_value(node.a, env, be), fold_value(node.b, env, be)
    if node.op == "+":
        return a + b
    if node.op == "-":
        return a - b
    return a * b if node.op == "*" else a / b


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) overflows to inf for x << 0: 1 / inf is the right 0
        return 1.0 / (1.0 + np.exp(-x))


_FUNCTIONS = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": _sigmoid, "max": np.maximum,
              "min": np.minimum, "where": np.where}
_COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
            "!=": np.not_equal}
_LOGIC = {"and": np.logical_and, "or": np.logical_or, "not": np.logical_not}


class NumPyBackend:
    """``Backend`` over NumPy arrays (float64, exact functions) on broadcast index grids. A read
    is clamped into its tensor: a read outside it (under a ``where`` that discards it) gives any
    element, never an error."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        self.arrays = {t: np.asarray(v, dtype=np.float64) for t, v in arrays.items()}

    def const(self, value: float) -> Any:
        return np.float64(value)

    def cast(self, index: Any) -> Any:
        return np.asarray(index, dtype=np.float64)

    def access(self, node: Access, indices: list[Any]) -> Any:
        arr = self.arrays[node.tensor]
        return arr[tuple(np.clip(i, 0, n - 1) for i, n in zip(indices, arr.shape))]

    def call(self, node: Call, args: list[Any]) -> Any:
        return _FUNCTIONS[node.fn](*args)

    def compare(self, op: str, a: Any, b: Any) -> Any:
        # values compare at the kernels' float32: a derived max= gradient's argmax test (F == out)
        # holds where F rounds to the float32 output
        if np.result_type(a, b).kind == "f":
            a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
        return _COMPARE[op](a, b)

    def logic(self, op: str, args: list[Any]) -> Any:
        return _LOGIC[op](*args)
