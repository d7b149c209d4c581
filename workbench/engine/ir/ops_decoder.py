"""The ops of a decoder-only language model's layer (Llama's): RMSNorm, rotary position
embedding, grouped-query attention with an optional causal mask, SiLU and the SiLU-gated product.
The K/V cache is extended by the library's ``concat`` along the sequence dim.

Like every op of the library (``ops``), each is a TE definition over logical indices, read
through the readers lowering gives it (so layouts apply), with a FLOP count and a NumPy
reference. Shapes: RMSNorm and rotary embedding work over the last dim of any rank; attention
takes q (..., H, S, D), k and v (..., KV, T, D) with KV dividing H (query head h reads K/V head
h // (H/KV), as Hugging Face's ``repeat_kv``). The causal mask is aligned bottom-right: query i
is at position T - S + i and sees the keys up to it, so a decode step (S = 1) sees the whole cache.
FLOPs follow the dense definitions (masked scores count, as a conv counts its padded taps).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tvm
from tvm import te

from .fastmath import fast_exp, fast_sigmoid
from .ops import OpDef, elementwise, reduce_axis, reduce_stage, register

__all__ = ["DECODER_OPS", "MASKED"]

#: the score a masked key gets before the softmax (exp of it minus the row max is 0)
MASKED = -3.0e38


def _f32(v: float) -> Any:
    return tvm.tirx.const(v, "float32")


########## RMSNorm ##########

def _rms_infer(shapes, a):
    x, g = shapes
    if g != (x[-1],):
        raise ValueError(f"RMSNorm weight of shape {g} does not match the last dim of {x}")
    return x


def _rms_compute(readers, shapes, a, out):
    X, G = readers
    x = shapes[0]
    n, eps = x[-1], a.get("eps", 1e-5)
    ms = reduce_stage("rms_mean", X, x, len(x) - 1, lambda i, r: te.sum(X(i) * X(i) * _f32(1.0 / n), axis=r))
    return lambda idx: X(idx) * tvm.tirx.rsqrt(ms[(*idx[:-1], 0)] + _f32(eps)) * G([idx[-1]])


def _rms_ref(vals, a):
    x, g = (np.asarray(v, np.float64) for v in vals)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + a.get("eps", 1e-5)) * g


#: x / sqrt(mean(x^2 over the last dim) + eps) * weight: 4 FLOPs an element (square, sum, two scales)
register(OpDef("rms_norm", "other", _rms_infer, _rms_compute, lambda shapes, a, out: 4 * math.prod(out), _rms_ref))


########## Rotary position embedding ##########

def _rotary_infer(shapes, a):
    x, c, s = shapes
    if len(x) < 2 or x[-1] % 2 or c != x[-2:] or s != x[-2:]:
        raise ValueError(f"rotary embedding needs x (..., positions, even head dim) and cos/sin tables of its last "
                         f"two dims, got {x}, {c}, {s}")
    return x


def _rotary_compute(readers, shapes, a, out):
    X, C, S = readers
    d_ext = shapes[0][-1]
    half = d_ext // 2

    def body(idx):
        *lead, p, d = idx
        # rotate-half: the partner of d is d + D/2 (negated) in the first half, d - D/2 in the second
        sign = tvm.tirx.if_then_else(d < half, _f32(-1.0), _f32(1.0))
        return X(idx) * C([p, d]) + sign * X([*lead, p, (d + half) % d_ext]) * S([p, d])

    return body


def _rotary_ref(vals, a):
    x, c, s = (np.asarray(v, np.float64) for v in vals)
    half = x.shape[-1] // 2
    return x * c + np.concatenate((-x[..., half:], x[..., :half]), axis=-1) * s


#: x * cos + rotate_half(x) * sin with cos/sin (positions, head dim) precomputed: 4 FLOPs an element
register(OpDef("rotary", "other", _rotary_infer, _rotary_compute, lambda shapes, a, out: 4 * math.prod(out),
               _rotary_ref))


########## Grouped-query attention ##########

def _attn_infer(shapes, a):
    q, k, v = shapes
    if len(q) < 3 or len(k) != len(q) or k != v or q[:-3] != k[:-3] or q[-1] != k[-1]:
        raise ValueError(f"attention needs q (..., H, S, D) and k, v (..., KV, T, D) alike, got {q}, {k}, {v}")
    if q[-3] % k[-3]:
        raise ValueError(f"{q[-3]} query heads do not divide into {k[-3]} key/value heads")
    if a.get("causal") and q[-2] > k[-2]:
        raise ValueError(f"a causal mask needs at least as many keys ({k[-2]}) as queries ({q[-2]})")
    return q


def _attn_compute(readers, shapes, a, out):
    """Scores, their row max, the sum of exp(score - max), the normalized probabilities, then the
    product with V: the softmax subtracts the row max, so no exp overflows."""
    Q, K, V = readers
    (*lead, heads, s_ext, d_ext), kv_shape = shapes[0], shapes[1]
    t_ext, rep, off = kv_shape[-2], heads // kv_shape[-3], kv_shape[-2] - s_ext
    scale, causal = _f32(a.get("scale", 1.0 / math.sqrt(d_ext))), a.get("causal", False)
    grid = (*lead, heads, s_ext, t_ext)

    def dot(*i):
        *b, h, s, j = i
        r = reduce_axis(d_ext, "r_attn_d")
        return te.sum(Q([*b, h, s, r]) * K([*b, h // rep, j, r]), axis=r)

    qk = te.compute(grid, dot, name="attn_qk")

    def score(i):  # scaled, and masked above the causal diagonal
        v = qk[tuple(i)] * scale
        return tvm.tirx.if_then_else(i[-1] <= i[-2] + off, v, _f32(MASKED)) if causal else v

    axis = len(grid) - 1
    mx = reduce_stage("attn_max", score, grid, axis, lambda i, r: te.max(score(i), axis=r))

    def row(i):
        return (*i[:-1], 0)

    sm = reduce_stage("attn_sum", score, grid, axis, lambda i, r: te.sum(fast_exp(score(i) - mx[row(i)]), axis=r))
    prob = te.compute(grid, lambda *i: fast_exp(score(i) - mx[row(i)]) / sm[row(i)], name="attn_prob")

    def body(idx):
        *b, h, s, d = idx
        j = reduce_axis(t_ext, "r_attn_t")
        return te.sum(prob[(*b, h, s, j)] * V([*b, h // rep, j, d]), axis=j)

    return body


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float | None = None,
                        causal: bool = False) -> np.ndarray:
    """softmax(q k^T * scale + mask) v in float64, K/V heads repeated to the query heads."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    rep = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, rep, axis=-3), np.repeat(v, rep, axis=-3)
    s = q @ np.swapaxes(k, -1, -2) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        n, t = s.shape[-2:]
        s = np.where(np.tril(np.ones((n, t), bool), t - n), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True) @ v


def _attn_flops(shapes, a, out):
    """Per score: 2D for q.k, 2D for the product with v, 8 for the scale, the max and two exp passes."""
    *lead, heads, s_ext, d_ext = shapes[0]
    return math.prod(lead) * heads * s_ext * shapes[1][-2] * (4 * d_ext + 8)


register(OpDef("attention", "other", _attn_infer, _attn_compute, _attn_flops,
               lambda vals, a: attention_reference(*vals[:3], a.get("scale"), a.get("causal", False)),
               labeler=lambda a: "GQA"))


########## SiLU and the gated product ##########

def _silu_ref(x):
    return x / (1.0 + np.exp(-x))


elementwise("silu", lambda x: x * fast_sigmoid(x), _silu_ref, 5)
#: silu(gate) * up, the gated MLP's product (SwiGLU)
elementwise("silu_mul", lambda g, u: g * fast_sigmoid(g) * u, lambda g, u: _silu_ref(g) * u, 6, nargs=2)

DECODER_OPS = ("rms_norm", "rotary", "attention", "silu", "silu_mul")
