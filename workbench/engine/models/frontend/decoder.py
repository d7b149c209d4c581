"""The ops of a decoder layer (``ops_decoder``), found in a Relax function as the chains of
primitive calls torch.export and ONNX hand them over as.

RMSNorm is power (or x * x), mean, add eps, rsqrt (or 1 / sqrt) and two multiplies; rotary
embedding two slices, a negation, a concat, two multiplies by constant tables and an add;
grouped-query attention the K/V heads repeated (expand_dims, broadcast_to, reshape), two batched
matmuls, a scale, an additive causal mask and a softmax (found where it has grouped heads or the
mask: plain multi-head attention maps call by call); SiLU x * sigmoid(x), and the gated
product silu(gate) * up. ``find_fused`` names each chain by the binding at its end. The data
movement inside a chain (the head repeat, the transpose of K, the rotate-half) is checked by
running it on probe data (``fold.FOLD``), not call by call, so any sequence of reshapes and
transposes that means the same is accepted; a chain that does not check out (a mask that is not
causal, say) is left to the per-call mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import relax

from .fold import FOLD, ints

__all__ = ["Fused", "find_fused", "emit"]

Shape = tuple[int, ...]

#: calls that only move data (the repeat of K/V heads, the split into heads, batch reshapes)
_MOVES = {"reshape", "broadcast_to", "expand_dims", "squeeze", "permute_dims", "flatten", "astype"}
#: a mask entry at or below this hides its key (float32's lowest, -inf and -1e4 all do)
_HIDDEN = -1e4


@dataclass(frozen=True)
class Fused:
    """One op of the library for a chain of Relax calls: its type, the tensors it reads
    (Relax expressions), its constants ``(role, value, dims)`` and attributes."""

    type: str
    inputs: tuple[Any, ...]
    consts: tuple[tuple[str, np.ndarray, str | None], ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()


class _NoMatch(Exception):
    pass


def _shape(e: Any) -> Shape | None:
    if isinstance(e, tvm.ir.GenericConst):
        return tuple(e.value.shape)
    ty = getattr(e, "ty", None)
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    dims = list(ty.shape.values)
    return ints(dims) if all(isinstance(d, tvm.tirx.IntImm) for d in dims) else None


def _strided_slice(a: Any, x: np.ndarray, axes: tuple, begin: tuple, end: tuple, strides: tuple = ()) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for i, ax in enumerate(axes):
        index[ax] = slice(begin[i], end[i], strides[i] if strides else 1)
    return x[tuple(index)]


_EVAL = {**FOLD, "strided_slice": _strided_slice}


class _Matcher:
    def __init__(self, defs: dict) -> None:
        self.defs = defs
        self.consts: dict[Any, np.ndarray | None] = {}

    def call(self, e: Any, *ops: str) -> relax.Call | None:
        """The call bound to ``e`` when it is one of ``ops``."""
        v = self.defs.get(e, e)
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name.removeprefix("relax.") in ops:
            return v
        return None

    def const(self, e: Any) -> np.ndarray | None:
        """The value of ``e`` when it is computed from constants only (remembered)."""
        if e not in self.consts:
            value = self.defs.get(e, e)
            try:
                self.consts[e] = None if isinstance(value, relax.Var) else self.eval(value, {})
            except _NoMatch:
                self.consts[e] = None
        return self.consts[e]

    def eval(self, e: Any, env: dict) -> Any:
        """``e`` computed with NumPy from ``env`` (var -> value) and constants."""
        if e in env:
            return env[e]
        if isinstance(e, relax.Var):
            if (c := self.const(e)) is not None:
                return c
            if not env or e not in self.defs:  # computed, and no probe to compute it from
                raise _NoMatch
            env[e] = self.eval(self.defs[e], env)
            return env[e]
        if isinstance(e, tvm.ir.GenericConst):
            return e.value.numpy()
        if isinstance(e, relax.ShapeExpr):
            return ints(e.values)
        if isinstance(e, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
            return e.value
        if isinstance(e, relax.Tuple):
            return tuple(self.eval(f, env) for f in e.fields)
        op = e.op.name.removeprefix("relax.") if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) else None
        if op not in _EVAL:
            raise _NoMatch
        return np.asarray(_EVAL[op](e.attrs, *(self.eval(a, env) for a in e.args)))

    def moves_back(self, e: Any) -> list[Any]:
        """``e``, then what it was moved from, back to the first tensor a computation made."""
        chain = [e]
        while (c := self.call(chain[-1], *_MOVES)) is not None:
            chain.append(c.args[0])
        return chain

    def moved_as(self, e: Any, s: Any, want: Any) -> bool:
        """Whether the calls from ``s`` to ``e`` take a probe ``P`` (distinct values) to ``want(P)``."""
        shape = _shape(s)
        if shape is None or self.const(s) is not None:
            return False
        probe = np.arange(1, math.prod(shape) + 1, dtype=np.float64).reshape(shape)
        try:
            got = self.eval(e, {s: probe})
        except _NoMatch:
            return False
        expected = np.asarray(want(probe))
        return got.size == expected.size and np.array_equal(got.reshape(-1), expected.reshape(-1))

    def source(self, e: Any, want: Any, fits: Any) -> Any:
        """The earliest tensor ``s`` of the data movement back to ``e`` with ``fits(shape)`` that
        moves as ``want`` says (``moved_as``), else None."""
        return next((s for s in reversed(self.moves_back(e))
                     if (shape := _shape(s)) is not None and fits(shape) and self.moved_as(e, s, want)), None)

    def split(self, c: relax.Call | None) -> tuple[Any, np.ndarray] | None:
        """(the computed operand, the constant one) of a binary call, else None."""
        if c is None:
            return None
        x, y = c.args
        cx, cy = self.const(x), self.const(y)
        if (cx is None) == (cy is None):
            return None
        return (y, cx) if cx is not None else (x, cy)


########## RMSNorm ##########

def _normed(m: _Matcher, e: Any) -> tuple[Any, float] | None:
    """(x, eps) when ``e`` is x / sqrt(mean(x^2, last dim) + eps)."""
    if (c := m.call(e, "divide")) is not None and (s := m.call(c.args[1], "sqrt")) is not None:
        x, var = c.args[0], s.args[0]
    elif (c := m.call(e, "multiply")) is not None:
        for x, inv in (tuple(c.args), tuple(c.args)[::-1]):
            if (r := m.call(inv, "rsqrt")) is not None:
                var = r.args[0]
                break
            d = m.call(inv, "divide")
            if d is not None and m.const(d.args[0]) is not None and np.all(m.const(d.args[0]) == 1.0) \
                    and (s := m.call(d.args[1], "sqrt")) is not None:
                var = s.args[0]
                break
        else:
            return None
    else:
        return None
    eps_split = m.split(m.call(var, "add"))
    if eps_split is None or eps_split[1].size != 1:
        return None
    mean = m.call(eps_split[0], "mean")
    shape = _shape(x)
    if mean is None or not shape or not mean.attrs.keepdims or mean.attrs.axis is None \
            or [int(a) % len(shape) for a in mean.attrs.axis] != [len(shape) - 1]:
        return None
    sq = mean.args[0]
    if (p := m.split(m.call(sq, "power"))) is not None:
        ok = p[0].same_as(x) and p[1].size == 1 and float(p[1].reshape(-1)[0]) == 2.0
    else:
        ok = (mul := m.call(sq, "multiply")) is not None and mul.args[0].same_as(x) and mul.args[1].same_as(x)
    return (x, float(eps_split[1].reshape(-1)[0])) if ok and m.const(x) is None else None


def _rms_norm(m: _Matcher, e: Any) -> Fused | None:
    if (sp := m.split(m.call(e, "multiply"))) is not None and (found := _normed(m, sp[0])) is not None:
        x, eps = found
        d = _shape(x)[-1]
        if sp[1].ndim == 0 or sp[1].shape[-1] != d or sp[1].size != d:
            return None
        weight = sp[1].reshape(d)
    elif (found := _normed(m, e)) is not None:
        x, eps = found
        weight = np.ones(_shape(x)[-1])
    else:
        return None
    return Fused("rms_norm", (x,), (("weight", weight.astype("float32"), "C"),), (("eps", eps),))


########## Rotary embedding ##########

def _rotate_half(p: np.ndarray) -> np.ndarray:
    half = p.shape[-1] // 2
    return np.concatenate((-p[..., half:], p[..., :half]), axis=-1)


def _table(c: np.ndarray, shape: Shape) -> np.ndarray | None:
    """A constant that broadcasts to ``shape`` as one (positions, head dim) table, else None."""
    try:
        rows = np.broadcast_to(c, shape).reshape(-1, *shape[-2:])
    except ValueError:
        return None
    return np.ascontiguousarray(rows[0], dtype="float32") if np.all(rows == rows[0]) else None


def _rotary(m: _Matcher, e: Any) -> Fused | None:
    add = m.call(e, "add")
    if add is None:
        return None
    for a, b in (tuple(add.args), tuple(add.args)[::-1]):
        pa, pb = m.split(m.call(a, "multiply")), m.split(m.call(b, "multiply"))
        if pa is None or pb is None or (shape := _shape(pa[0])) is None or len(shape) < 2 or shape[-1] % 2:
            continue
        cos, sin = _table(pa[1], shape), _table(pb[1], shape)
        if cos is None or sin is None or _shape(pb[0]) != shape or not m.moved_as(pb[0], pa[0], _rotate_half):
            continue
        return Fused("rotary", (pa[0],), (("cos", cos, None), ("sin", sin, None)))
    return None


########## Grouped-query attention ##########

def _same(p: np.ndarray) -> np.ndarray:
    return p


def _scores(m: _Matcher, e: Any, st: Shape) -> tuple[relax.Call, float, np.ndarray | None] | None:
    """Back from a softmax's input to the q.k matmul: (the matmul, the scale, the additive mask
    as (S, T) or None), through data movement that keeps the scores in order."""
    scale, mask = 1.0, None
    while True:
        shape = _shape(e)
        if shape is None or shape[-2:] != st:
            return None
        if (mv := m.call(e, *_MOVES)) is not None:
            if not m.moved_as(e, mv.args[0], _same):
                return None
            e = mv.args[0]
        elif (mm := m.call(e, "matmul")) is not None:
            return mm, scale, mask
        elif (sp := m.split(m.call(e, "add"))) is not None and mask is None:
            if (mask := _table(sp[1], shape)) is None or scale <= 0:
                return None
            mask = mask * scale  # a scale after the mask scales it too
            e = sp[0]
        elif (sp := m.split(m.call(e, "multiply", "divide"))) is not None and sp[1].size == 1:
            c = float(sp[1].reshape(-1)[0])
            if m.call(e, "divide") is not None:
                if not m.defs.get(e, e).args[0].same_as(sp[0]):
                    return None  # a constant divided by the scores
                c = 1.0 / c
            scale *= c
            e = sp[0]
        else:
            return None


def _attention(m: _Matcher, e: Any) -> Fused | None:
    out = m.call(e, "matmul")
    if out is None or (ps := _shape(out.args[0])) is None or len(ps) < 3:
        return None
    st, sm = ps[-2:], m.moves_back(out.args[0])[-1]
    if m.call(sm, "nn.softmax") is None or (_shape(sm) or ())[-2:] != st or not m.moved_as(out.args[0], sm, _same):
        return None
    d = _shape(e)[-1]
    soft = m.call(sm, "nn.softmax")
    if int(soft.attrs.axis) % len(_shape(sm)) != len(_shape(sm)) - 1 or (found := _scores(m, soft.args[0], st)) is None:
        return None
    qk, scale, mask = found
    q = m.source(qk.args[0], _same, lambda s: len(s) >= 3 and s[-2:] == (st[0], d))
    if q is None:
        return None
    heads, lead = _shape(q)[-3], _shape(q)[:-3]

    def kv_fits(s: Shape) -> bool:
        return len(s) == len(lead) + 3 and s[:-3] == lead and heads % s[-3] == 0 and s[-2:] == (st[1], d)

    def repeat(p: np.ndarray) -> np.ndarray:
        return np.repeat(p, heads // p.shape[-3], axis=-3)

    k = m.source(qk.args[1], lambda p: np.swapaxes(repeat(p), -1, -2), kv_fits)
    v = m.source(out.args[1], repeat, kv_fits)
    if k is None or v is None or _shape(k) != _shape(v) or (mask is None and _shape(k)[-3] == heads):
        return None  # plain multi-head attention stays batched GMMs and a softmax (as BERT's)
    causal = False
    if mask is not None:
        allowed = np.tril(np.ones(st, bool), st[1] - st[0])
        if np.any(mask[allowed] != 0) or np.any(mask[~allowed] > _HIDDEN):
            return None
        causal = not allowed.all()
    return Fused("attention", (q, k, v), (), (("scale", scale), ("causal", causal)))


########## SiLU and the gated product ##########

def _silu_of(m: _Matcher, e: Any) -> Any:
    """x when ``e`` is silu(x) (x * sigmoid(x), either order), else None."""
    if (c := m.call(e, "nn.silu")) is not None:
        return c.args[0]
    if (c := m.call(e, "multiply")) is not None:
        for x, s in (tuple(c.args), tuple(c.args)[::-1]):
            if (sig := m.call(s, "sigmoid")) is not None and sig.args[0].same_as(x):
                return x
    return None


def _silu(m: _Matcher, e: Any) -> Fused | None:
    x = _silu_of(m, e)
    return Fused("silu", (x,)) if x is not None and m.const(x) is None else None


def _silu_mul(m: _Matcher, e: Any) -> Fused | None:
    if (c := m.call(e, "multiply")) is None:
        return None
    for a, b in (tuple(c.args), tuple(c.args)[::-1]):
        if (g := _silu_of(m, a)) is not None and m.const(g) is None and m.const(b) is None \
                and _shape(a) == _shape(b):
            return Fused("silu_mul", (g, b))
    return None


_RULES = (_attention, _rotary, _rms_norm, _silu_mul, _silu)


def find_fused(func: relax.Function) -> dict[Any, Fused]:
    """Each binding of ``func`` that ends a chain of a decoder op -> that op."""
    defs = {b.var: b.value for blk in func.body.blocks for b in blk.bindings}
    m = _Matcher(defs)
    found = {}
    for var, value in defs.items():
        if isinstance(value, relax.Call) and m.const(var) is None:
            if (f := next((f for rule in _RULES if (f := rule(m, var)) is not None), None)) is not None:
                found[var] = f
    return found


def emit(cv: Any, f: Fused, out: Shape) -> Any:
    """Add op ``f`` to the graph the converter ``cv`` builds; returns its value at shape ``out``."""
    ins = [cv.env[i] for i in f.inputs]
    attrs = dict(f.attrs)
    if f.type in ("silu", "silu_mul", "rms_norm"):  # these run on the tensor a view reshapes
        srcs = [cv.source(v) for v in ins]
        last = cv.b.tensors[srcs[0]].shape[-1] == cv.shape(ins[0])[-1]
        if len({cv.b.tensors[s].shape for s in srcs}) > 1 or not last:
            srcs = [cv.real(v) for v in ins]
    else:
        srcs = [cv.real(v) for v in ins]
    base = {"rms_norm": "rms", "attention": "attention"}.get(f.type, f.type)
    return cv.wrap(cv.op(base, f.type, *srcs, consts=list(f.consts), **attrs), out)
