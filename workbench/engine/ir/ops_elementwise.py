"""Element-wise ops (they take layouts by propagation): activations, arithmetic, the layout
conversion ``layout_transform``, ``bias_add`` and ``scale_axis`` (one value per index of an
axis), and ``elementwise``, the factory that defines one from a TE and a NumPy function.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from tvm import te

from .fastmath import fast_erf, fast_sigmoid, fast_tanh
from .ops_registry import OpDef, f32, lazy_torch, register, to_torch

__all__ = ["elementwise"]


def elementwise(type: str, fn: Callable[..., Any], ref: Callable[..., np.ndarray], flops_per: int = 1,
        nargs: int = 1) -> OpDef:
    """Register an op of ``nargs`` equal-shaped inputs computing ``fn`` (TE) and ``ref`` (NumPy) on
    each element, at ``flops_per`` FLOPs an element; attributes are passed to both as keywords."""
    def infer(shapes, a):
        for s in shapes[1:nargs]:
            if s != shapes[0]:
                raise ValueError(f"{type} needs equal shapes, got {shapes}")
        return shapes[0]

    def compute(readers, shapes, a, out):
        return lambda idx: fn(*(r(idx) for r in readers[:nargs]), **a)

    return register(OpDef(type, "elementwise", infer, compute,
                           lambda shapes, a, out: flops_per * math.prod(out),
                           lambda vals, a: ref(*(np.asarray(v, np.float64) for v in vals[:nargs]), **a)))


elementwise("relu", lambda x: te.max(x, f32(0.0)), lambda x: np.maximum(x, 0))
elementwise("relu6", lambda x: te.min(te.max(x, f32(0.0)), f32(6.0)), lambda x: np.clip(x, 0, 6), 2)
elementwise("gelu", lambda x: f32(0.5) * x * (f32(1.0) + fast_erf(x * f32(1 / math.sqrt(2)))),
    lambda x: (0.5 * to_torch(x) * (1 + lazy_torch().erf(to_torch(x) / math.sqrt(2)))).numpy(), 5)
elementwise("scale", lambda x, factor: x * f32(factor), lambda x, factor: x * factor)
elementwise("add", lambda x, y: x + y, lambda x, y: x + y, nargs=2)
elementwise("multiply", lambda x, y: x * y, lambda x, y: x * y, nargs=2)
#: a layout conversion: copies its input, read in one layout, into another layout
elementwise("layout_transform", lambda x: x, lambda x: x, 0)
elementwise("sigmoid", fast_sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), 4)
elementwise("tanh", fast_tanh, np.tanh, 5)
elementwise("erf", fast_erf, lambda x: lazy_torch().erf(to_torch(x)).numpy(), 5)
elementwise("clip", lambda x, lo, hi: te.min(te.max(x, f32(lo)), f32(hi)), lambda x, lo, hi: np.clip(x, lo, hi), 2)


def _bias_compute(readers, shapes, a, out):
    X, B = readers
    axis = a.get("axis", 1) % len(out)
    return lambda idx: X(idx) + B([idx[axis]])


def _bias_infer(shapes, a):
    x, b = shapes
    axis = a.get("axis", 1) % len(x)
    if b != (x[axis],):
        raise ValueError(f"bias of shape {b} does not match axis {axis} of {x}")
    return x


def _bias_ref(vals, a):
    x, b = (np.asarray(v, np.float64) for v in vals)
    axis = a.get("axis", 1) % x.ndim
    return x + b.reshape([-1 if d == axis else 1 for d in range(x.ndim)])


register(OpDef("bias_add", "elementwise", _bias_infer, _bias_compute,
                lambda shapes, a, out: math.prod(out), _bias_ref))


def _scale_axis_compute(readers, shapes, a, out):
    X, S = readers
    axis = a.get("axis", 1) % len(out)
    return lambda idx: X(idx) * S([idx[axis]])


def _scale_axis_ref(vals, a):
    x, s = (np.asarray(v, np.float64) for v in vals)
    axis = a.get("axis", 1) % x.ndim
    return x * s.reshape([-1 if d == axis else 1 for d in range(x.ndim)])


#: ``x * s[axis]``: a per-channel scale (a batch norm that no conv before it absorbs)
register(OpDef("scale_axis", "elementwise", _bias_infer, _scale_axis_compute,
                lambda shapes, a, out: math.prod(out), _scale_axis_ref))
