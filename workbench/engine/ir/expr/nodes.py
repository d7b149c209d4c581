"""The syntax tree of an expression op: frozen, hashable nodes that print back as the language
(with the parentheses their precedence needs), so an op's text is its tree's ``str``.

Columns (1-based, for errors) are kept on each node but take no part in equality: the same op
written with other spacing is the same op.

>>> Binary("*", Binary("+", Name("i"), Num(1)), Num(2))
Binary('*', Binary('+', Name('i'), Num(1)), Num(2))
>>> print(Binary("*", Binary("+", Name("i"), Num(1)), Num(2)))
(i + 1) * 2
>>> print(Binary("-", Name("a"), Binary("-", Name("b"), Name("c"))))
a - (b - c)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union

__all__ = ["Num", "Name", "Access", "Unary", "Binary", "Call", "Statement", "Node", "PRECEDENCE", "COMPARISONS",
           "FUNCTIONS", "REDUCTIONS", "children", "walk", "first_column"]

#: binary operators by binding strength (higher binds tighter); "not" binds at 3, unary "-" at 7
PRECEDENCE = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
              "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6}
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
#: function -> number of arguments
FUNCTIONS = {"exp": 1, "log": 1, "tanh": 1, "sigmoid": 1, "max": 2, "min": 2, "where": 3}
#: the assignment forms: "=" computes, "+=" sums and "max=" takes the maximum over the reduction indices
REDUCTIONS = ("=", "+=", "max=")
_UNARY = {"-": 7, "not": 3}


@dataclass(frozen=True, slots=True)
class Num:
    value: int | float
    column: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return repr(self.value) if isinstance(self.value, float) else str(self.value)

    def __repr__(self) -> str:
        return f"Num({self.value!r})"


@dataclass(frozen=True, slots=True)
class Name:
    """An index variable (``i``, ``r``...)."""

    name: str
    column: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Name({self.name!r})"


@dataclass(frozen=True, slots=True)
class Access:
    """An element of a tensor, ``inp[n, c, 2*y + r]``."""

    tensor: str
    indices: tuple["Node", ...]
    column: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return f"{self.tensor}[{', '.join(map(str, self.indices))}]"

    def __repr__(self) -> str:
        return f"Access({self.tensor!r}, {self.indices!r})"


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "-" | "not"
    x: "Node"
    column: int = field(default=0, compare=False)

    def __str__(self) -> str:
        inner = _wrap(self.x, _UNARY[self.op] + (0 if isinstance(self.x, Unary) else 1))
        return f"{self.op}{' ' if self.op == 'not' else ''}{inner}"

    def __repr__(self) -> str:
        return f"Unary({self.op!r}, {self.x!r})"


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    a: "Node"
    b: "Node"
    column: int = field(default=0, compare=False)

    def __str__(self) -> str:
        p = PRECEDENCE[self.op]
        # left-associative: the right operand needs parentheses at equal strength (a - (b - c))
        return f"{_wrap(self.a, p)} {self.op} {_wrap(self.b, p + 1)}"

    def __repr__(self) -> str:
        return f"Binary({self.op!r}, {self.a!r}, {self.b!r})"


@dataclass(frozen=True, slots=True)
class Call:
    fn: str
    args: tuple["Node", ...]
    column: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(str, self.args))})"

    def __repr__(self) -> str:
        return f"Call({self.fn!r}, {self.args!r})"


Node = Union[Num, Name, Access, Unary, Binary, Call]


@dataclass(frozen=True, slots=True)
class Statement:
    """``out[i, j] += rhs``: the output's local name and indices, the assignment form, the value;
    ``domain`` declares reduction indices and their extents (``... for r < 3, s < 3``)."""

    out: Access
    reduce: str  # one of REDUCTIONS
    rhs: Node
    domain: tuple[tuple[str, int], ...] = ()

    def __str__(self) -> str:
        over = f" for {', '.join(f'{n} < {e}' for n, e in self.domain)}" if self.domain else ""
        return f"{self.out} {self.reduce} {self.rhs}{over}"


def _strength(node: Node) -> int:
    if isinstance(node, Binary):
        return PRECEDENCE[node.op]
    if isinstance(node, Unary):
        return _UNARY[node.op]
    return 9


def _wrap(node: Node, need: int) -> str:
    return f"({node})" if _strength(node) < need else str(node)


def children(node: Node) -> tuple[Node, ...]:
    """The nodes right under ``node``, left to right."""
    if isinstance(node, Access):
        return node.indices
    if isinstance(node, Unary):
        return (node.x,)
    if isinstance(node, Binary):
        return (node.a, node.b)
    return node.args if isinstance(node, Call) else ()


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node under it, parents first."""
    yield node
    for k in children(node):
        yield from walk(k)


def first_column(node: Node) -> int:
    """The column of the node's first character (a binary node's own is its operator's)."""
    return min((n.column for n in walk(node) if n.column), default=0)
