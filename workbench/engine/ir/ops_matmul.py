"""Matrix multiplication (ALT's GMM), batched over any leading dims, with the second operand
optionally transposed (``transpose_b``: a weight stored output-major, as linear layers keep it).
"""

from __future__ import annotations

import math

import numpy as np
from tvm import te

from .ops_registry import OpDef, reduce_axis, register

__all__: list[str] = []


def _mm_infer(shapes, a):
    x, w = shapes[:2]
    k2, n = (w[-1], w[-2]) if a.get("transpose_b") else (w[-2], w[-1])
    if x[-1] != k2 or x[:-2] != w[:-2]:
        raise ValueError(f"cannot multiply {x} by {w}{' transposed' if a.get('transpose_b') else ''}")
    return (*x[:-1], n)


def _mm_compute(readers, shapes, a, out):
    A, B = readers
    k_ext, tb = shapes[0][-1], a.get("transpose_b", False)

    def body(idx):
        *b, i, j = idx
        k = reduce_axis(k_ext, "rk")
        return te.sum(A([*b, i, k]) * (B([*b, j, k]) if tb else B([*b, k, j])), axis=k)

    return body


def _mm_ref(vals, a):
    x, w = (np.asarray(v, np.float64) for v in vals[:2])
    return x @ (np.swapaxes(w, -1, -2) if a.get("transpose_b") else w)


register(OpDef("matmul", "complex", _mm_infer, _mm_compute,
                lambda shapes, a, out: 2 * math.prod(out) * shapes[0][-1], _mm_ref,
                labeler=lambda a: "GMM", out_dims=lambda d, r, a: "BMN"[-r:]))
