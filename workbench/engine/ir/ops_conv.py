"""Convolutions (ALT's C1D, C2D, DEP, GRP, DIL, C3D) and transposed convolutions (T1D, T2D,
T3D) over 1 to 3 spatial dims, with PyTorch's ``conv{nd}d`` / ``conv_transpose{nd}d`` as their
references. Both read a zero-padded copy of the input (``pad_stage``) where the stored layout does
not already hold the zeros, so no bounds test runs inside the reduction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm import te

from ..base.index import Window
from .ops_registry import OpDef, Shape, lazy_torch, margin, per_dim, reduce_axis, register, to_torch
from .ops_shape import pad_stage

__all__ = ["tconv_executed_macs"]


########## Convolutions (C1D, C2D, DEP, GRP, DIL, C3D) ##########

def _conv_infer(shapes, a):
    (x, w), nd = shapes[:2], len(shapes[0]) - 2
    s, p, d, g = per_dim(a, "stride", nd, 1), per_dim(a, "padding", nd, 0), per_dim(a, "dilation", nd, 1), a.get("groups", 1)
    if len(w) != nd + 2 or x[1] != w[1] * g or w[0] % g:
        raise ValueError(f"input {x} and weight {w} do not fit with groups={g}")
    out = tuple((x[2 + j] + 2 * p[j] - d[j] * (w[2 + j] - 1) - 1) // s[j] + 1 for j in range(nd))
    if min(out) <= 0:
        raise ValueError(f"kernel {w[2:]} larger than padded input {x[2:]}")
    return (x[0], w[0], *out)


def _conv_compute(readers, shapes, a, out):
    X, W = readers
    xs, ws = shapes[:2]
    nd, g = len(xs) - 2, a.get("groups", 1)
    s, p, d = per_dim(a, "stride", nd, 1), per_dim(a, "padding", nd, 0), per_dim(a, "dilation", nd, 1)
    cg, og = ws[1], ws[0] // g

    # positions read past the input before and after it, per spatial dim
    need = [(p[j], max(0, (out[2 + j] - 1) * s[j] + (ws[2 + j] - 1) * d[j] - p[j] - xs[2 + j] + 1)) for j in range(nd)]
    held = [margin(X, 2 + j) for j in range(nd)]
    shift = [0] * nd
    if any(h[0] < nb or h[1] < na for (nb, na), h in zip(need, held)):
        # zeros around the input in a stage of their own (TOPI's pad): a bounds test inside the
        # reduction would run once per multiply-add and keep the loop from vectorizing
        shift = [nb for nb, _ in need]
        X = pad_stage("conv_input_pad", X, xs, (0, 0, *shift), (0, 0, *(na for _, na in need)))

    def body(idx):
        n, o, *y = idx
        rc = reduce_axis(cg, "rc")
        rk = [reduce_axis(k, f"rk{j}") for j, k in enumerate(ws[2:])]
        c = (o // og) * cg + rc if g > 1 else rc
        pos = [y[j] * s[j] + rk[j] * d[j] - p[j] + shift[j] for j in range(nd)]
        win = {2 + j: Window(y[j], s[j], rk[j] * d[j] - p[j], -p[j], (ws[2 + j] - 1) * d[j] + 1, out[2 + j])
               for j in range(nd)}
        return te.sum(X([n, c, *pos], win) * W([o, rc, *rk]), axis=[rc, *rk])

    return body


def _conv_flops(shapes, a, out):
    w = shapes[1]
    return 2 * math.prod(out) * w[1] * math.prod(w[2:])


def _torch_conv(kind: str, vals, a, **extra):
    """PyTorch's ``conv{nd}d`` / ``conv_transpose{nd}d`` as the reference."""
    x, w = vals[:2]
    nd = x.ndim - 2
    fn = getattr(lazy_torch().nn.functional, f"{kind}{nd}d")
    return fn(to_torch(x), to_torch(w), stride=per_dim(a, "stride", nd, 1), padding=per_dim(a, "padding", nd, 0), **extra).numpy()


def _conv_ref(vals, a):
    nd = vals[0].ndim - 2
    return _torch_conv("conv", vals, a, dilation=per_dim(a, "dilation", nd, 1), groups=a.get("groups", 1))


def _conv_label(a):
    nd = a.get("nd", 2)
    if nd != 2:
        return f"C{nd}D"
    if a.get("depthwise"):
        return "DEP"
    if a.get("groups", 1) > 1:
        return "GRP"
    return "DIL" if max(per_dim(a, "dilation", 2, 1)) > 1 else "C2D"


for _nd in (1, 2, 3):
    register(OpDef(f"conv{_nd}d", "complex", _conv_infer, _conv_compute, _conv_flops, _conv_ref,
                    labeler=lambda a, nd=_nd: _conv_label({**a, "nd": nd})))


########## Transposed convolutions (T1D, T2D, T3D) ##########

@dataclass(frozen=True)
class _TDim:
    """One spatial dim of a transposed conv: stride, padding, kernel, taps per phase, input
    zeros before/after (``lo``, ``hi``), input and output extents."""

    s: int
    p: int
    k: int
    t: int
    lo: int
    hi: int
    n_in: int
    n_out: int


def _tconv_dims(shapes: list[Shape], a: dict, out: Shape) -> list[_TDim]:
    xs, ws = shapes[:2]
    nd = len(xs) - 2
    s, p = per_dim(a, "stride", nd, 1), per_dim(a, "padding", nd, 0)
    dims = []
    for j in range(nd):
        k, n_in, n_out = ws[2 + j], xs[2 + j], out[2 + j]
        t = -(-k // s[j])
        # input positions read: (y + p)//s - t over y < n_out, t < T
        lo = max(0, t - 1 - p[j] // s[j])
        hi = max(0, (n_out - 1 + p[j]) // s[j] - (n_in - 1))
        dims.append(_TDim(s[j], p[j], k, t, lo, hi, n_in, n_out))
    return dims


def _tconv_infer(shapes, a):
    (x, w), nd = shapes[:2], len(shapes[0]) - 2
    s, p, op = per_dim(a, "stride", nd, 1), per_dim(a, "padding", nd, 0), per_dim(a, "output_padding", nd, 0)
    if len(w) != nd + 2 or x[1] != w[0]:
        raise ValueError(f"input {x} and weight {w} (C, O, *K) do not fit")
    if min(s) < 1 or min(p) < 0 or len(s) != nd or len(p) != nd or len(op) != nd:
        raise ValueError(f"stride {s} must be >= 1 and padding {p} >= 0, one per spatial dim")
    if any(not 0 <= o < st for o, st in zip(op, s)):
        raise ValueError(f"output_padding {op} must be >= 0 and smaller than the stride {s}")
    out = tuple((x[2 + j] - 1) * s[j] - 2 * p[j] + w[2 + j] + op[j] for j in range(nd))
    if min(out) <= 0:
        raise ValueError(f"padding {p} leaves no output (output size {out})")
    return (x[0], w[1], *out)


def _tconv_compute(readers, shapes, a, out):
    """The transposed conv by stride phases, with no tap-validity test in its reduction.

    Per spatial dim (stride s, padding p, kernel K), output position y has the phase
    r = (y + p) mod s, and the only taps that reach it are k = r + s*t, t < T = ceil(K/s), each
    reading input position (y + p)//s - t (an exact division by construction)::

        Y[n, o, y] = sum over c, t of Xpad[n, c, (y + p)//s - t + lo] * Wpad[c, o, (y + p) mod s + s*t]

    Xpad is the input with ``lo``/``hi`` zeros around it (where border outputs read past the
    input) and Wpad the weight zero-padded along each kernel dim to T*s taps, so that every phase
    has T of them. Each is an auxiliary stage of the kernel made only when needed (without it
    the reduction reads the input or weight through its layout directly). The output stays one
    compute over the logical (n, o, *y), so output layouts and propagation apply unchanged.
    The reduction executes N*O*C*prod(out*T) multiply-adds: the FLOP count / 2 when every K is a
    multiple of its s, more by exactly the zero-padded weight taps otherwise
    (``tconv_executed_macs``).
    """
    X, W = readers
    xs, ws = shapes[:2]
    dims = _tconv_dims(shapes, a, out)

    if any(d.lo or d.hi for d in dims):  # zeros around the input, so no read is guarded
        X = pad_stage("tconv_input_pad", X, xs, (0, 0, *(d.lo for d in dims)), (0, 0, *(d.hi for d in dims)))
    if any(d.t * d.s != d.k for d in dims):  # zero taps, so every phase has T of them
        W = pad_stage("tconv_weight_pad", W, ws, (0,) * len(ws), (0, 0, *(d.t * d.s - d.k for d in dims)))

    def body(idx):
        n, o, *y = idx
        rc = reduce_axis(ws[0], "rc")
        rt = [reduce_axis(d.t, f"rt{j}") for j, d in enumerate(dims)]
        pos = [(v + d.p) // d.s - t + d.lo for v, t, d in zip(y, rt, dims)]
        tap = [(v + d.p) % d.s + d.s * t for v, t, d in zip(y, rt, dims)]
        return te.sum(X([n, rc, *pos]) * W([rc, o, *tap]), axis=[rc, *rt])

    return body


def _tconv_taps(d: _TDim) -> int:
    """Kernel taps summed over a dim's output positions: for each phase r, the outputs of that
    phase times the taps k < K with k = r (mod s) (taps reading input zeros at the border included,
    as convolutions count their padded taps)."""
    return sum(len(range((r - d.p) % d.s, d.n_out, d.s)) * len(range(r, d.k, d.s)) for r in range(d.s))


def _tconv_flops(shapes, a, out):
    x, w = shapes[:2]
    return 2 * x[0] * w[0] * w[1] * math.prod(_tconv_taps(d) for d in _tconv_dims(shapes, a, out))


def tconv_executed_macs(shapes: list[Shape], attrs: dict) -> int:
    """Multiply-adds the phase form executes: N*O*C*prod(out*T); equal to the FLOP count / 2
    when every kernel dim is a multiple of its stride, larger by the zero-padded taps otherwise."""
    x, w = shapes[:2]
    dims = _tconv_dims(shapes, attrs, _tconv_infer(shapes, attrs))
    return x[0] * w[0] * w[1] * math.prod(d.n_out * d.t for d in dims)


def _tconv_ref(vals, a):
    return _torch_conv("conv_transpose", vals, a, output_padding=per_dim(a, "output_padding", vals[0].ndim - 2, 0))


for _nd in (1, 2, 3):
    register(OpDef(f"conv_transpose{_nd}d", "complex", _tconv_infer, _tconv_compute, _tconv_flops,
                    _tconv_ref, labeler=lambda a, nd=_nd: f"T{nd}D"))
