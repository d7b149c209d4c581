"""The gradient of an expression op with respect to one of its inputs, as expression ops (NeoFlow
section 4.2): for ``out[x] (+)= F(x, r)`` and a read ``A[f(x, r)]`` in ``F``,

    dA[z] += dout[x] * dF/dA[f(x, r)]   over the (x, r) with f(x, r) = z,

where ``solve`` writes ``x`` and ``r`` in terms of ``z`` and new reduction indices. A ``max=`` op
passes ``dout`` only where ``F`` equals the output (the argmax; tied elements each take it). An
input read at several places gets one op per place and an op that sums them.

Guards that only keep indices in range are the gradient's boundaries (a convolution's input
border); a stride or dilation that skips elements, or a repeated index, makes the mapping
non-invertible: the op's ``note`` says so and names the guard.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from .affine import Form, combine, const, form_of, form_range, map_names, node_of, substitute
from .check import kind_of
from .define import ExprOp, define
from .diff import ONE, derivative, mul
from .lexer import ExprError
from .nodes import COMPARISONS, Access, Binary, Call, Name, Node, Num, Statement, Unary, walk
from .solve import solve

__all__ = ["Gradient", "gradient", "sum_of"]

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Gradient:
    """One op of an input's gradient: its graph name and checked op; ``guarded`` when a read's
    mapping is not invertible (``ExprOp.note`` says how)."""

    name: str
    op: ExprOp
    guarded: bool


def gradient(op: ExprOp, wrt: str, out: str, grad_out: str, shapes: Mapping[str, Sequence[int]],
             name: str) -> list[Gradient]:
    """The ops computing ``name`` = d loss / d ``wrt`` for ``op`` (whose output is the tensor
    ``out``, its gradient ``grad_out``); ``shapes`` holds every tensor these ops read. The last
    op computes ``name``; ones before it are named ``name__1``, ``name__2``..."""
    shapes = {**shapes, out: op.out_shape, grad_out: op.out_shape}
    reads = list(dict.fromkeys(a for a in walk(op.statement.rhs) if isinstance(a, Access) and a.tensor == wrt))
    parts = [(a, d) for a in reads if (d := derivative(op.statement.rhs, a)) is not None]
    shape = tuple(int(d) for d in shapes[wrt])
    if not parts:  # read only in conditions: no gradient flows
        idx = tuple(Name(f"z{k}") for k in range(len(shape)))
        zero = define(Statement(Access(name, idx), "=", Binary("*", Num(0.0), Access(wrt, idx))), shapes, shape)
        return [Gradient(name, replace(zero, note=f"{wrt} reaches {out} only through conditions: its gradient is 0"),
                         False)]
    names = [name] if len(parts) == 1 else [f"{name}__{k + 1}" for k in range(len(parts))]
    ops = [_site(op, a, d, out, grad_out, shapes, shape, n) for (a, d), n in zip(parts, names)]
    if len(ops) > 1:
        summed = sum_of(name, names, {**shapes, **{n: shape for n in names}})
        ops.append(Gradient(name, replace(summed, note=f"{wrt} is read at {len(parts)} places: the sum of their "
                                                        "gradients"), any(g.guarded for g in ops)))
    return ops


def sum_of(name: str, parts: Sequence[str], shapes: Mapping[str, Sequence[int]]) -> ExprOp:
    """``name[z0, ...] = part1[z0, ...] + part2[z0, ...] + ...`` (parts of one shape)."""
    idx = tuple(Name(f"z{k}") for k in range(len(shapes[parts[0]])))
    total: Node = Access(parts[0], idx)
    for p in parts[1:]:
        total = Binary("+", total, Access(p, idx))
    return define(Statement(Access(name, idx), "=", total), shapes, tuple(shapes[parts[0]]))


def _site(op: ExprOp, read: Access, d: Node, out: str, grad_out: str, shapes: Mapping[str, Sequence[int]],
          shape: Shape, name: str) -> Gradient:
    stmt, extents = op.statement, dict(op.extents)
    outs = tuple(Name(x) for x in op.out_indices)
    g = mul(Access(grad_out, outs), d)
    if stmt.reduce == "max=":  # the argmax alone passes the gradient on
        g = Call("where", (Binary("==", stmt.rhs, Access(out, outs)), g, Num(0.0)))
    temp = [f"@{k}" for k in range(len(shape))]
    sol = solve(read, extents, temp, shape)
    free = dict(sol.free)
    final: dict[str, str] = {}
    for k, idx in enumerate(read.indices):  # name dim k after its plain index where that index is it
        if isinstance(idx, Name) and sol.subst[idx.name] == {temp[k]: 1} and idx.name not in final.values():
            final[temp[k]] = idx.name
    for k, t in enumerate(temp):
        if t not in final:
            final[t] = _fresh(f"z{k}", set(free) | set(final.values()))
    rename = lambda n: Name(final.get(n.name, n.name))  # noqa: E731
    env = {v: _rename_form(f, final, rename) for v, f in sol.subst.items()}
    ext = {**{final[t]: n for t, n in zip(temp, shape)}, **free}
    value = _rewrite(g, env, ext)
    guards = [map_names(c, rename) for c in sol.guards]
    value, guards = _pinned(g, value, guards, env, ext, free)
    if guards:
        cond = guards[0]
        for c in guards[1:]:
            cond = Binary("and", cond, c)
        value = Call("where", (cond, value, Num(0.0)))
    head = Access(name, tuple(Name(final[t]) for t in temp))
    text = Statement(head, "+=" if free else "=", value, tuple(free.items()))
    result = _shortest(text, shapes, shape)
    guarded = bool({"stride", "repeat"} & set(sol.kinds))
    note = f"gradient of {read.tensor} at {read} in {out}"
    if guarded:
        note += (f"; non-invertible (a {' and a '.join(k for k in sol.kinds if k != 'bounds')}): reduces over "
                 f"{', '.join(free)} where {' and '.join(map(str, guards))}")
    if stmt.reduce == "max=":
        note += "; tied maxima each take the whole gradient"
    return Gradient(name, replace(result, note=note), guarded)


def _rename_form(f: Form, final: Mapping[str, str], rename) -> Form:
    return {(final.get(k, k) if isinstance(k, str) else map_names(k, rename) if k is not None else None): v
            for k, v in f.items()}


def _rewrite(node: Node, env: Mapping[str, Form], ext: Mapping[str, int]) -> Node | bool:
    """``node`` with the forward op's indices replaced by their solution, every index simplified;
    a comparison of indices that their ranges decide is True or False, folded into the ``and``,
    ``or``, ``not`` or ``where`` above it."""
    if kind_of(node) == "index":
        return node_of(form_of(node, ext, env))
    if isinstance(node, Access):
        return Access(node.tensor, tuple(node_of(form_of(i, ext, env)) for i in node.indices))
    if isinstance(node, Binary) and node.op in COMPARISONS and kind_of(node.a) == kind_of(node.b) == "index":
        a, b = form_of(node.a, ext, env), form_of(node.b, ext, env)
        decided = _decide(node.op, *form_range(combine((1, a), (-1, b)), ext))
        return Binary(node.op, node_of(a), node_of(b)) if decided is None else decided
    if isinstance(node, Unary):
        x = _rewrite(node.x, env, ext)
        return (not x) if isinstance(x, bool) else Unary(node.op, x)
    if isinstance(node, Binary):
        a, b = _rewrite(node.a, env, ext), _rewrite(node.b, env, ext)
        if node.op in ("and", "or"):
            stop = node.op == "or"  # the value that decides it alone
            if a is stop or b is stop:
                return stop
            return b if a is not stop and isinstance(a, bool) else a if isinstance(b, bool) else Binary(node.op, a, b)
        if node.op == "*" and (a == ONE or b == ONE):  # a where the ranges decided left a factor 1.0
            return b if a == ONE else a
        return Binary(node.op, a, b)
    if isinstance(node, Call):
        args = [_rewrite(x, env, ext) for x in node.args]
        if node.fn == "where" and isinstance(args[0], bool):
            return args[1] if args[0] else args[2]
        return Call(node.fn, tuple(args))
    return node


def _pinned(g: Node, value: Node, guards: list[Node], env: dict[str, Form], ext: dict[str, int],
            free: dict[str, int]) -> tuple[Node, list[Node]]:
    """A new reduction index the value is zero without (``where(m0 == 0 and ..., x, 0.0)``, a
    forward guard's stride) is fixed there: one point instead of a loop over it. Updates ``env``,
    ``ext`` and ``free``; returns the value and the guards without it."""
    pins = {c.a.name: int(c.b.value) for c in _required(value) if isinstance(c, Binary) and c.op == "=="
            and isinstance(c.a, Name) and c.a.name in free and isinstance(c.b, Num) and isinstance(c.b.value, int)
            and 0 <= c.b.value < free[c.a.name]}
    if not pins:
        return value, guards
    fixed = {v: const(c) for v, c in pins.items()}
    rest = {k: n for k, n in ext.items() if k not in pins}
    kept = [_rewrite(c, fixed, rest) for c in guards]
    if any(c is False for c in kept):  # no point left: leave it as it was
        return value, guards
    env.update({v: substitute(f, fixed) for v, f in env.items()})
    for v in pins:
        del ext[v], free[v]
    return _rewrite(g, env, ext), [c for c in kept if c is not True]


def _required(node: Node) -> list[Node]:
    """Conditions without which ``node`` is 0: the guards of ``where(c, x, 0.0)`` and its factors'."""
    if isinstance(node, Call) and node.fn == "where" and node.args[2] == Num(0.0):
        cond, parts = node.args[0], []
        while isinstance(cond, Binary) and cond.op == "and":
            parts.append(cond.b)
            cond = cond.a
        return [cond, *parts] + _required(node.args[1])
    if isinstance(node, Binary) and node.op == "*":
        return _required(node.a) + _required(node.b)
    return []


def _decide(op: str, lo: int, hi: int) -> bool | None:
    """``d op 0`` for every ``d`` in ``lo..hi``: True, False, or None when it depends."""
    holds = {"<": hi < 0, "<=": hi <= 0, ">": lo > 0, ">=": lo >= 0, "==": lo == hi == 0, "!=": lo > 0 or hi < 0}
    fails = {"<": lo >= 0, "<=": lo > 0, ">": hi <= 0, ">=": hi < 0, "==": lo > 0 or hi < 0, "!=": lo == hi == 0}
    return True if holds[op] else False if fails[op] else None


def _shortest(stmt: Statement, shapes: Mapping[str, Sequence[int]], shape: Shape) -> ExprOp:
    """The op checked, each index of its ``for`` clause left out where the reads alone give it
    the same extent."""
    best = define(stmt, shapes, shape)
    want = dict(best.extents)
    for d in stmt.domain:
        domain = tuple(x for x in best.statement.domain if x != d)
        try:
            cand = define(replace(best.statement, domain=domain), shapes, shape)
        except ExprError:
            continue
        if dict(cand.extents) == want:
            best = cand
    return best


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name
