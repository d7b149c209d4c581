"""Index expressions as linear forms, for the gradient's linear systems (``solve``): a ``Form``
maps index names, and quasi-affine terms that cannot be split further (``(h - r) // 2`` as a
whole), to rational coefficients; ``form_of`` reads an index tree into one (simplifying ``//``
and ``%`` where the ranges allow) and ``node_of`` prints one back as a tree of the language.

Every name ranges over ``0 .. extent - 1`` (``extents``).

>>> from workbench.engine.ir.expr.parser import parse_node
>>> print(node_of(form_of(parse_node("(2*h + u) // 2 + (2*h + u) % 2 - h"), {"h": 5, "u": 2})))
u
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable, Hashable, Mapping

from .define import index_range
from .nodes import Access, Binary, Call, Name, Node, Num, Unary

__all__ = ["Form", "const", "var", "form_of", "node_of", "form_range", "combine", "scale", "substitute", "divide",
           "map_names"]

#: key -> coefficient; the key None holds the constant
Form = dict[Hashable, Fraction]


def const(value: int | Fraction) -> Form:
    return {None: Fraction(value)} if value else {}


def var(key: Hashable, coef: int = 1) -> Form:
    return {key: Fraction(coef)}


def combine(*terms: tuple[int | Fraction, Form]) -> Form:
    """The sum of ``coef * form`` over ``terms``, without zero coefficients."""
    out: Form = {}
    for c, f in terms:
        for k, v in f.items():
            out[k] = out.get(k, Fraction(0)) + Fraction(c) * v
    return {k: v for k, v in out.items() if v}


def scale(f: Form, c: int | Fraction) -> Form:
    return combine((c, f))


def substitute(f: Form, env: Mapping[Hashable, Form]) -> Form:
    """``f`` with every key in ``env`` replaced by its form."""
    return combine(*((v, env[k]) if k in env else (v, {k: Fraction(1)}) for k, v in f.items()))


def form_of(node: Node, extents: Mapping[str, int], env: Mapping[str, Form] | None = None) -> Form:
    """The form of index tree ``node`` with its names replaced by ``env``'s forms (others stay)."""
    env = env or {}
    if isinstance(node, Num):
        return const(int(node.value))
    if isinstance(node, Name):
        return dict(env[node.name]) if node.name in env else var(node.name)
    if isinstance(node, Unary):
        return scale(form_of(node.x, extents, env), -1)
    a = form_of(node.a, extents, env)
    b = form_of(node.b, extents, env)
    if node.op in ("+", "-"):
        return _recombine(combine((1, a), (1 if node.op == "+" else -1, b)), extents)
    if node.op == "*":
        c, f = (a.get(None, 0), b) if set(a) <= {None} else (b.get(None, 0), a)
        return scale(f, c)
    return divide(a, int(b.get(None, 0)), node.op, extents)


def divide(e: Form, c: int, op: str, extents: Mapping[str, int]) -> Form:
    """``e // c`` or ``e % c``: the terms of ``e`` that are multiples of ``c`` leave the floor
    whole; what remains is folded when its range lies within one multiple of ``c``."""
    whole = {k: v for k, v in e.items() if k is not None and v.denominator == 1 and v % c == 0}
    rest = {k: v for k, v in e.items() if k not in whole}
    if any(v.denominator != 1 for v in rest.values()):  # not an integer form: keep it whole
        whole, rest = {}, e
    lo, hi = form_range(rest, extents)
    if lo // c == hi // c:  # one multiple of c: the floor is a constant
        q = lo // c
        return combine((Fraction(1, c), whole), (1, const(q))) if op == "//" else combine((1, rest), (1, const(-q * c)))
    inner = node_of(rest)
    if op == "//" and isinstance(inner, Binary) and inner.op == "//" and len(rest) == 1:  # (x // a) // c
        atom: Node = Binary("//", inner.a, Num(int(inner.b.value) * c))
    else:
        atom = Binary(op, inner, Num(c))
    return combine((Fraction(1, c), whole), (1, var(atom))) if op == "//" else var(atom)


def _recombine(f: Form, extents: Mapping[str, int]) -> Form:
    """``c*(x // c) + x % c`` is ``x`` (with any common factor)."""
    for k, v in list(f.items()):
        if isinstance(k, Binary) and k.op == "%" and k in f:
            quotient = Binary("//", k.a, k.b)
            if f.get(quotient) == v * int(k.b.value):
                rest = {kk: vv for kk, vv in f.items() if kk not in (k, quotient)}
                f = combine((1, rest), (v, form_of(k.a, extents)))
    return f


def form_range(f: Form, extents: Mapping[str, int]) -> tuple[int, int]:
    """Bounds of an integer form's values (exact per term, summed: a superset)."""
    lo = hi = Fraction(f.get(None, 0))
    for k, v in f.items():
        if k is None:
            continue
        a, b = (0, extents[k] - 1) if isinstance(k, str) else index_range(k, extents)
        lo, hi = lo + min(v * a, v * b), hi + max(v * a, v * b)
    return math.floor(lo), math.ceil(hi)


def node_of(f: Form) -> Node:
    """The tree of ``f``: positive terms first, then negative ones, then the constant; rational
    coefficients over their common denominator ``d`` as ``(...) // d``."""
    d = math.lcm(*(v.denominator for v in f.values())) if f else 1
    if d > 1:
        return Binary("//", node_of(scale(f, d)), Num(d))
    terms = [(k, int(v)) for k, v in f.items() if k is not None]
    terms.sort(key=lambda kv: kv[1] < 0)
    out: Node | None = None
    for k, v in terms:
        key = Name(k) if isinstance(k, str) else k
        term = key if abs(v) == 1 else Binary("*", Num(abs(v)), key)
        if out is None:
            out = term if v > 0 else Unary("-", term)
        else:
            out = Binary("+" if v > 0 else "-", out, term)
    c = int(f.get(None, 0))
    if out is None:
        return Num(c) if c >= 0 else Unary("-", Num(-c))
    return Binary("+" if c > 0 else "-", out, Num(abs(c))) if c else out


def map_names(node: Node, fn: Callable[[Name], Node]) -> Node:
    """``node`` with every index name replaced by ``fn(name)``."""
    if isinstance(node, Name):
        return fn(node)
    if isinstance(node, Access):
        return Access(node.tensor, tuple(map_names(i, fn) for i in node.indices))
    if isinstance(node, Unary):
        return Unary(node.op, map_names(node.x, fn))
    if isinstance(node, Binary):
        return Binary(node.op, map_names(node.a, fn), map_names(node.b, fn))
    if isinstance(node, Call):
        return Call(node.fn, tuple(map_names(a, fn) for a in node.args))
    return node
