"""Ops that move data without arithmetic: pad, reshape, transpose and concat (all of kind
``other``: they stop layout propagation), and ``pad_stage``, the pad as an auxiliary stage
that the convolutions put in front of their reductions.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import tvm
from tvm import te

from ..base.index import all_of, simplify
from .ops_registry import OpDef, Reader, Shape, f32, per_dim, register

__all__ = ["pad_compute", "pad_stage"]


########## pad ##########

def _pad_infer(shapes, a):
    x = shapes[0]
    before, after = per_dim(a, "before", len(x), 0), per_dim(a, "after", len(x), 0)
    return tuple(n + b + e for n, b, e in zip(x, before, after))


def pad_compute(readers, shapes, a, out):
    """The ``pad`` op's definition: zeros (or ``value``) ``before`` and ``after`` each dim."""
    (X,), x = readers, shapes[0]
    before, after = per_dim(a, "before", len(x), 0), per_dim(a, "after", len(x), 0)

    def body(idx):
        src = [i - b for i, b in zip(idx, before)]
        conds = [i >= 0 for i, b in zip(src, before) if b] + [i < n for i, n, e in zip(src, x, after) if e]
        if not conds:
            return X(src)
        return tvm.tirx.if_then_else(all_of(conds), X(src), f32(a.get("value", 0.0)))

    return body


def _pad_ref(vals, a):
    x = vals[0]
    width = list(zip(per_dim(a, "before", x.ndim, 0), per_dim(a, "after", x.ndim, 0)))
    return np.pad(x, width, constant_values=a.get("value", 0.0))


register(OpDef("pad", "other", _pad_infer, pad_compute, lambda shapes, a, out: 0, _pad_ref))


def pad_stage(name: str, reader: Reader, shape: Shape, before: Shape, after: Shape) -> Reader:
    """An auxiliary stage holding ``reader``'s tensor with zeros around it (the ``pad`` op's
    definition), and a reader of it at padded positions: the guard runs once per element there,
    not once per multiply-add in a reduction that reads it."""
    fill = pad_compute([reader], [shape], {"before": before, "after": after}, shape)
    padded = te.compute(tuple(n + b + e for n, b, e in zip(shape, before, after)), lambda *i: fill(list(i)), name=name)
    return lambda idx, win=None: padded[tuple(map(simplify, idx))]


########## reshape, transpose ##########

def _reshape_infer(shapes, a):
    new = tuple(a["shape"])
    if math.prod(new) != math.prod(shapes[0]):
        raise ValueError(f"cannot reshape {shapes[0]} to {new}")
    return new


def _reshape_compute(readers, shapes, a, out):
    (X,), x = readers, shapes[0]

    def body(idx):
        flat = 0
        for i, n in zip(idx, out):
            flat = flat * n + i
        src = []
        for n in reversed(x):
            src.append(flat % n)
            flat = flat // n
        return X(src[::-1])

    return body


register(OpDef("reshape", "other", _reshape_infer, _reshape_compute, lambda shapes, a, out: 0,
                lambda vals, a: np.reshape(vals[0], a["shape"])))


def _transpose_compute(readers, shapes, a, out):
    (X,), perm = readers, a["perm"]

    def body(idx):
        src = [None] * len(idx)
        for k, p in enumerate(perm):
            src[p] = idx[k]
        return X(src)

    return body


register(OpDef("transpose", "other", lambda shapes, a: tuple(shapes[0][p] for p in a["perm"]),
                _transpose_compute, lambda shapes, a, out: 0,
                lambda vals, a: np.transpose(vals[0], a["perm"]),
                out_dims=lambda d, r, a: "".join(d[p] for p in a["perm"]) if len(d) == r else "ABCDEFGH"[:r]))


########## concat ##########

def _concat_infer(shapes, a):
    axis = a.get("axis", 0) % len(shapes[0])
    for s in shapes[1:]:
        if len(s) != len(shapes[0]) or any(n != m for d, (n, m) in enumerate(zip(s, shapes[0])) if d != axis):
            raise ValueError(f"cannot concatenate {shapes} along axis {axis}")
    return tuple(sum(s[axis] for s in shapes) if d == axis else n for d, n in enumerate(shapes[0]))


def _concat_compute(readers, shapes, a, out):
    axis = a.get("axis", 0) % len(out)
    starts = list(itertools.accumulate((s[axis] for s in shapes[:-1]), initial=0))

    def read(k, idx):
        return readers[k]([i - starts[k] if d == axis else i for d, i in enumerate(idx)])

    def body(idx):
        v = read(len(readers) - 1, idx)
        for k in range(len(readers) - 2, -1, -1):  # if_then_else evaluates one branch only
            v = tvm.tirx.if_then_else(idx[axis] < starts[k + 1], read(k, idx), v)
        return v

    return body


register(OpDef("concat", "other", _concat_infer, _concat_compute, lambda shapes, a, out: 0,
                lambda vals, a: np.concatenate(vals, axis=a.get("axis", 0))))
