"""Ops that reduce a window or an axis and stop layout propagation: 2-D pooling (max or
average), softmax and layer norm. Softmax and layer norm compute their row statistics in
auxiliary stages (``reduce_stage``) that the output then reads.
"""

from __future__ import annotations

import math

import numpy as np
import tvm
from tvm import te

from ..base.index import Window, all_of
from .fastmath import fast_exp
from .ops_registry import OpDef, f32, lazy_torch, per_dim, reduce_axis, reduce_stage, register, to_torch

__all__: list[str] = []


########## pooling ##########

def _pool_infer(shapes, a):
    x = shapes[0]
    k, s, p = per_dim(a, "kernel", 2, 1), per_dim(a, "stride", 2, 1), per_dim(a, "padding", 2, 0)
    return (*x[:2], *((x[2 + j] + 2 * p[j] - k[j]) // s[j] + 1 for j in range(2)))


def _pool_compute(readers, shapes, a, out):
    (X,), x = readers, shapes[0]
    k, s, p = per_dim(a, "kernel", 2, 1), per_dim(a, "stride", 2, 1), per_dim(a, "padding", 2, 0)
    is_max = a.get("mode", "max") == "max"

    def body(idx):
        n, c, *y = idx
        rk = [reduce_axis(k[j], f"rk{j}") for j in range(2)]
        pos = [y[j] * s[j] + rk[j] - p[j] for j in range(2)]
        win = {2 + j: Window(y[j], s[j], rk[j] - p[j], -p[j], k[j], out[2 + j]) for j in range(2)}
        fill = f32(-3.0e38 if is_max else 0.0)
        v = X([n, c, *pos], win)
        if any(p):
            v = tvm.tirx.if_then_else(all_of([q >= 0 for q in pos] + [q < x[2 + j] for j, q in enumerate(pos)]), v, fill)
        if is_max:
            return te.max(v, axis=rk)
        return te.sum(v * f32(1.0 / (k[0] * k[1])), axis=rk)

    return body


def _pool_ref(vals, a):
    f = lazy_torch().nn.functional
    k, s, p = per_dim(a, "kernel", 2, 1), per_dim(a, "stride", 2, 1), per_dim(a, "padding", 2, 0)
    if a.get("mode", "max") == "max":
        return f.max_pool2d(to_torch(vals[0]), k, s, p).numpy()
    return f.avg_pool2d(to_torch(vals[0]), k, s, p, count_include_pad=True).numpy()


register(OpDef("pool2d", "other", _pool_infer, _pool_compute,
                lambda shapes, a, out: math.prod(out) * math.prod(per_dim(a, "kernel", 2, 1)), _pool_ref))


########## softmax, layer norm ##########

def _softmax_compute(readers, shapes, a, out):
    (X,), x = readers, shapes[0]
    axis = a.get("axis", -1) % len(x)
    mx = reduce_stage("softmax_max", X, x, axis, lambda i, r: te.max(X(i), axis=r))
    sm = reduce_stage("softmax_sum", X, x, axis,
                       lambda i, r: te.sum(fast_exp(X(i) - mx[tuple(0 if d == axis else v for d, v in enumerate(i))]), axis=r))

    def body(idx):
        red = tuple(0 if d == axis else v for d, v in enumerate(idx))
        return fast_exp(X(idx) - mx[red]) / sm[red]

    return body


def _softmax_ref(vals, a):
    x = np.asarray(vals[0], np.float64)
    e = np.exp(x - x.max(axis=a.get("axis", -1), keepdims=True))
    return e / e.sum(axis=a.get("axis", -1), keepdims=True)


register(OpDef("softmax", "other", lambda shapes, a: shapes[0], _softmax_compute,
                lambda shapes, a, out: 5 * math.prod(out), _softmax_ref))


def _ln_compute(readers, shapes, a, out):
    X, G, B = readers
    x = shapes[0]
    axis, n, eps = len(x) - 1, x[-1], a.get("eps", 1e-5)
    mean = reduce_stage("ln_mean", X, x, axis, lambda i, r: te.sum(X(i) * f32(1.0 / n), axis=r))
    var = reduce_stage("ln_var", X, x, axis, lambda i, r: te.sum(
        (X(i) - mean[(*i[:-1], 0)]) * (X(i) - mean[(*i[:-1], 0)]) * f32(1.0 / n), axis=r))

    def body(idx):
        red = (*idx[:-1], 0)
        return (X(idx) - mean[red]) * tvm.tirx.rsqrt(var[red] + f32(eps)) * G([idx[-1]]) + B([idx[-1]])

    return body


def _ln_ref(vals, a):
    x, g, b = (np.asarray(v, np.float64) for v in vals)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + a.get("eps", 1e-5)) * g + b


register(OpDef("layer_norm", "other", lambda shapes, a: shapes[0], _ln_compute,
                lambda shapes, a, out: 8 * math.prod(out), _ln_ref))
