"""The linear system of a gradient (NeoFlow section 4.2): a read ``A[f(x, r)]`` of an op with
output indices ``x`` and reduction indices ``r`` contributes to ``dA[z]`` at every point where
``z = f(x, r)``. ``solve`` writes each of ``x, r`` as an affine function of ``z`` and of free
indices (the gradient's new reduction axes), with the guards where the mapping is not onto.

A quasi-affine index ``e // c`` or ``e % c`` gets a quotient ``q`` and a remainder ``u`` with
``e = c*q + u``, ``0 <= u < c``, so a ``//`` / ``%`` pair recombines as ``e = c*z1 + z2``.
Elimination, one unknown at a time: an equation ``b + M*(...) = P`` with ``0 <= b < M`` splits
into ``b = P % M`` and ``... = P // M`` (mixed radix: grouped channels, strides the window
covers); otherwise the unknown of largest extent is solved for (fewest reduction points left),
with a guard that the division is exact when its coefficient is not 1. Solved unknowns outside
their range, inexact divisions and equations left over (a repeated index) become guards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Hashable, Mapping

from .affine import Form, combine, const, divide, form_range, node_of, scale, substitute, var
from .nodes import Access, Binary, Name, Node, Num

__all__ = ["Solution", "solve"]


@dataclass(frozen=True)
class Solution:
    """Every index of the forward op as a form over the parameters (``params``, the gradient's
    output indices) and ``free`` (new reduction indices with their extents), under ``guards``
    (conditions on indices) of the kinds in ``kinds`` (``bounds``, ``stride``, ``repeat``)."""

    subst: dict[str, Form]
    free: tuple[tuple[str, int], ...]
    guards: tuple[Node, ...]
    kinds: tuple[str, ...]


def solve(read: Access, extents: Mapping[str, int], params: list[str], shape: tuple[int, ...]) -> Solution:
    """Solve ``params[k] = read.indices[k]`` for the indices in ``extents`` (the forward op's),
    each param ``params[k]`` ranging over ``shape[k]``."""
    s = _System(extents)
    for p, idx, n in zip(params, read.indices, shape):
        s.ext[p] = n
        s.eqs.append(combine((1, s.linear(idx)), (-1, var(p))))
    s.eliminate()
    return s.solution(extents)


class _System:
    def __init__(self, extents: Mapping[str, int]) -> None:
        self.ext: dict[Hashable, int] = dict(extents)
        self.unknowns: dict[str, int] = dict(extents)  # name -> extent
        self.eqs: list[Form] = []
        self.aux: dict[tuple, tuple[Form, Form]] = {}
        self.quotients: set[str] = set()
        self.pivots: dict[str, Form] = {}
        self.consistency: list[Form] = []

    def linear(self, node: Node) -> Form:
        """The form of an index, with a quotient and remainder unknown per distinct ``e // c``."""
        if not isinstance(node, Binary) or node.op not in ("//", "%"):
            if isinstance(node, Binary):
                a, b = self.linear(node.a), self.linear(node.b)
                if node.op == "*":
                    c, f = (a.get(None, 0), b) if set(a) <= {None} else (b.get(None, 0), a)
                    return scale(f, c)
                return combine((1, a), (1 if node.op == "+" else -1, b))
            if isinstance(node, Name):
                return var(node.name)
            if isinstance(node, Num):
                return const(int(node.value))
            return scale(self.linear(node.x), -1)
        e, c = self.linear(node.a), int(node.b.value)
        key = (frozenset(e.items()), c)
        if key not in self.aux:
            lo, hi = form_range(e, self.ext)
            q, u = (_fresh(f"{p}{len(self.aux)}", self.ext) for p in ("q", "m"))
            self.unknowns[q], self.unknowns[u] = hi // c - lo // c + 1, c
            self.ext[q], self.ext[u] = self.unknowns[q], c
            self.quotients.add(q)
            quotient = combine((1, var(q)), (1, const(lo // c)))
            self.eqs.append(combine((1, e), (-c, quotient), (-1, var(u))))
            self.aux[key] = (quotient, var(u))
        return self.aux[key][0 if node.op == "//" else 1]

    def _pivot(self, name: str, form: Form) -> None:
        self.pivots[name] = form
        sub = {name: form}
        self.pivots = {k: substitute(v, sub) for k, v in self.pivots.items()}
        self.eqs = [substitute(e, sub) for e in self.eqs]

    def eliminate(self) -> None:
        while self.eqs:
            eqs = [_integral(e) for e in self.eqs]
            self.eqs = [e for e in eqs if self._open(e)]
            self.consistency += [e for e in eqs if e and not self._open(e)]
            if self.eqs and not self._mixed_radix():
                self._largest()

    def _open(self, eq: Form) -> list[str]:
        return [k for k in eq if isinstance(k, str) and k in self.unknowns and k not in self.pivots]

    def _mixed_radix(self) -> bool:
        best = None
        for i, eq in enumerate(self.eqs):
            open_ = self._open(eq)
            for b in open_:
                others = [abs(int(eq[o])) for o in open_ if o != b]
                if abs(eq[b]) == 1 and others and self.unknowns[b] <= (m := math.gcd(*others)):
                    if best is None or self.unknowns[b] > self.unknowns[best[1]]:
                        best = (i, b, m)
        if best is None:
            return False
        i, b, m = best
        eq = scale(self.eqs[i], int(self.eqs[i][b]))  # b's coefficient is +1
        open_ = self._open(eq)
        known = scale({k: v for k, v in eq.items() if k not in open_}, -1)  # b + rest = known
        rest = {k: v for k, v in eq.items() if k in open_ and k != b}
        self.eqs[i] = combine((Fraction(1, m), rest), (-1, divide(known, m, "//", self.ext)))
        self._pivot(b, divide(known, m, "%", self.ext))
        return True

    def _largest(self) -> None:
        def score(eq: Form, v: str) -> tuple:  # a forced choice first, then the most points saved
            return len(self._open(eq)) == 1, self.unknowns[v], abs(eq[v]) == 1

        i, v = max(((i, v) for i, eq in enumerate(self.eqs) for v in self._open(eq)),
                   key=lambda iv: score(self.eqs[iv[0]], iv[1]))
        eq = self.eqs.pop(i)
        a = eq[v]
        self._pivot(v, scale({k: c for k, c in eq.items() if k != v}, -1 / a))

    def solution(self, extents: Mapping[str, int]) -> Solution:
        free = tuple((v, n) for v, n in self.unknowns.items() if v not in self.pivots)
        guards: list[Node] = []
        kinds: list[str] = []
        for v, f in self.pivots.items():
            d = math.lcm(*(c.denominator for c in f.values())) if f else 1
            if d > 1:
                guards.append(Binary("==", Binary("%", node_of(scale(f, d)), Num(d)), Num(0)))
                kinds.append("stride")
            if v in self.quotients:  # in range whenever the other indices are
                continue
            lo, hi = form_range(f, self.ext)
            if lo < 0:
                guards.append(Binary(">=", node_of(f), Num(0)))
            if hi >= self.unknowns[v]:
                guards.append(Binary("<", node_of(f), Num(self.unknowns[v])))
            kinds += ["bounds"] * ((lo < 0) + (hi >= self.unknowns[v]))
        for eq in self.consistency:
            sign = -1 if next(v for k, v in eq.items() if k is not None) < 0 else 1
            guards.append(Binary("==", node_of(scale(eq, sign)), Num(0)))
            kinds.append("repeat")
        subst = {v: self.pivots.get(v, var(v)) for v in extents}
        return Solution(subst, free, tuple(guards), tuple(dict.fromkeys(kinds)))


def _integral(f: Form) -> Form:
    """``f = 0`` with whole coefficients."""
    d = math.lcm(*(c.denominator for c in f.values())) if f else 1
    return scale(f, d)


def _fresh(name: str, taken) -> str:
    while name in taken:
        name += "_"
    return name
