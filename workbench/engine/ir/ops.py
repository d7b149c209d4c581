"""The operator library: for each operator a TE definition written over *logical* indices,
its kind, an exact FLOP count and a NumPy/PyTorch reference.

Operators never see layouts. ``compute(readers, shapes, attrs, out_shape)`` returns the
function from an output's logical index to its value; it reads each input through a
``reader(idx, windows)`` that lowering builds from the input's layout (ALT section 6: the
access is rewritten, the operator is not). Sliding-window reads pass ``windows`` so an
unfolded input is read tile by tile (the paper's Eq. 1).

Kinds: ``complex`` ops get their own layouts tuned (ALT's C1D, C2D, DEP, GRP, DIL, C3D, GMM,
T2D, T3D); ``elementwise`` ops take layouts by propagation; ``other`` ops stop propagation;
``opaque`` ops are TVM's own TIR for an imported op the library does not model. FLOPs follow
the dense definitions: a multiply-add is 2, every tap of a convolution counts (for a transposed
conv, the taps of each output's stride phase, ``_tconv_compute``), other operations 1.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tvm
from tvm import te

from ..base.errors import GraphError
from .fastmath import fast_erf, fast_exp, fast_sigmoid, fast_tanh
from ..base.index import Window, all_of, bind_axis, simplify

__all__ = ["OpDef", "OPS", "Reader", "elementwise", "per_dim", "reduce_axis", "reduce_stage", "register",
           "tconv_executed_macs"]

Shape = tuple[int, ...]
Reader = Callable[..., Any]  # reader(idx, windows=None) -> PrimExpr
Body = Callable[[list], Any]


@dataclass(frozen=True)
class OpDef:
    type: str
    kind: str  # "complex" | "elementwise" | "other"
    infer: Callable[[list[Shape], dict], Shape]
    compute: Callable[[list[Reader], list[Shape], dict, Shape], Body]
    flops: Callable[[list[Shape], dict, Shape], int]
    reference: Callable[[list[np.ndarray], dict], np.ndarray]
    labeler: Callable[[dict], str] | None = None
    out_dims: Callable[[str, int, dict], str] | None = None

    def label(self, attrs: dict) -> str:
        return self.labeler(attrs) if self.labeler else self.type

    def dims(self, in_dims: str, rank: int, attrs: dict | None = None) -> str:
        if self.out_dims:
            return self.out_dims(in_dims, rank, attrs or {})
        return in_dims if len(in_dims) == rank else "ABCDEFGH"[:rank]


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    OPS[op.type] = op
    return op


def _f32(v: float) -> Any:
    return tvm.tirx.const(v, "float32")


def _torch():
    import torch  # imported lazily: only references need it

    return torch


def _t(x: np.ndarray):
    return _torch().from_numpy(np.asarray(x, dtype=np.float64))


def reduce_axis(extent: int, name: str) -> Any:
    """A reduction axis whose range the lowering's index simplifier knows."""
    ax = te.reduce_axis((0, extent), name)
    bind_axis(ax.var, extent)
    return ax


def per_dim(a: Mapping, key: str, nd: int, default: int) -> tuple[int, ...]:
    """Attribute ``key`` of ``a`` (an int or one per spatial dim) as one value per dim.

    >>> per_dim({"stride": 2}, "stride", 2, 1), per_dim({"stride": [2, 1]}, "stride", 2, 1)
    ((2, 2), (2, 1))
    """
    v = a.get(key, default)
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd


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
        X = _pad_stage("conv_input_pad", X, xs, (0, 0, *shift), (0, 0, *(na for _, na in need)))

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
    fn = getattr(_torch().nn.functional, f"{kind}{nd}d")
    return fn(_t(x), _t(w), stride=per_dim(a, "stride", nd, 1), padding=per_dim(a, "padding", nd, 0), **extra).numpy()


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


def margin(reader: Reader, dim: int) -> tuple[int, int]:
    """Zeros the reader's stored layout holds before and after logical ``dim`` (none when the
    reader does not say)."""
    held = getattr(reader, "margin", None)
    return held(dim) if held else (0, 0)


def _pad_stage(name: str, reader: Reader, shape: Shape, before: Shape, after: Shape) -> Reader:
    """An auxiliary stage holding ``reader``'s tensor with zeros around it (the ``pad`` op's
    definition), and a reader of it at padded positions: the guard runs once per element there,
    not once per multiply-add in a reduction that reads it."""
    fill = _pad_compute([reader], [shape], {"before": before, "after": after}, shape)
    padded = te.compute(tuple(n + b + e for n, b, e in zip(shape, before, after)), lambda *i: fill(list(i)), name=name)
    return lambda idx, win=None: padded[tuple(map(simplify, idx))]


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
    (``tconv_executed_macs``); the old form visited all K taps under ``t % s == 0`` (s^d times
    as many at stride s).
    """
    X, W = readers
    xs, ws = shapes[:2]
    dims = _tconv_dims(shapes, a, out)

    if any(d.lo or d.hi for d in dims):  # zeros around the input, so no read is guarded
        X = _pad_stage("tconv_input_pad", X, xs, (0, 0, *(d.lo for d in dims)), (0, 0, *(d.hi for d in dims)))
    if any(d.t * d.s != d.k for d in dims):  # zero taps, so every phase has T of them
        W = _pad_stage("tconv_weight_pad", W, ws, (0,) * len(ws), (0, 0, *(d.t * d.s - d.k for d in dims)))

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


########## Matrix multiplication (GMM, batched GMM) ##########

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


########## Element-wise ops ##########

def elementwise(type: str, fn: Callable[..., Any], ref: Callable[..., np.ndarray], flops_per: int = 1,
        nargs: int = 1) -> OpDef:
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


elementwise("relu", lambda x: te.max(x, _f32(0.0)), lambda x: np.maximum(x, 0))
elementwise("relu6", lambda x: te.min(te.max(x, _f32(0.0)), _f32(6.0)), lambda x: np.clip(x, 0, 6), 2)
elementwise("gelu", lambda x: _f32(0.5) * x * (_f32(1.0) + fast_erf(x * _f32(1 / math.sqrt(2)))),
    lambda x: (0.5 * _t(x) * (1 + _torch().erf(_t(x) / math.sqrt(2)))).numpy(), 5)
elementwise("scale", lambda x, factor: x * _f32(factor), lambda x, factor: x * factor)
elementwise("add", lambda x, y: x + y, lambda x, y: x + y, nargs=2)
elementwise("multiply", lambda x, y: x * y, lambda x, y: x * y, nargs=2)
#: a layout conversion: copies its input, read in one layout, into another layout
elementwise("layout_transform", lambda x: x, lambda x: x, 0)


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


########## Other simple ops: pad, pooling, softmax, layer norm, reshape, transpose ##########

def _pad_infer(shapes, a):
    x = shapes[0]
    before, after = per_dim(a, "before", len(x), 0), per_dim(a, "after", len(x), 0)
    return tuple(n + b + e for n, b, e in zip(x, before, after))


def _pad_compute(readers, shapes, a, out):
    (X,), x = readers, shapes[0]
    before, after = per_dim(a, "before", len(x), 0), per_dim(a, "after", len(x), 0)

    def body(idx):
        src = [i - b for i, b in zip(idx, before)]
        conds = [i >= 0 for i, b in zip(src, before) if b] + [i < n for i, n, e in zip(src, x, after) if e]
        if not conds:
            return X(src)
        return tvm.tirx.if_then_else(all_of(conds), X(src), _f32(a.get("value", 0.0)))

    return body


def _pad_ref(vals, a):
    x = vals[0]
    width = list(zip(per_dim(a, "before", x.ndim, 0), per_dim(a, "after", x.ndim, 0)))
    return np.pad(x, width, constant_values=a.get("value", 0.0))


register(OpDef("pad", "other", _pad_infer, _pad_compute, lambda shapes, a, out: 0, _pad_ref))


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
        fill = _f32(-3.0e38 if is_max else 0.0)
        v = X([n, c, *pos], win)
        if any(p):
            v = tvm.tirx.if_then_else(all_of([q >= 0 for q in pos] + [q < x[2 + j] for j, q in enumerate(pos)]), v, fill)
        if is_max:
            return te.max(v, axis=rk)
        return te.sum(v * _f32(1.0 / (k[0] * k[1])), axis=rk)

    return body


def _pool_ref(vals, a):
    f = _torch().nn.functional
    k, s, p = per_dim(a, "kernel", 2, 1), per_dim(a, "stride", 2, 1), per_dim(a, "padding", 2, 0)
    if a.get("mode", "max") == "max":
        return f.max_pool2d(_t(vals[0]), k, s, p).numpy()
    return f.avg_pool2d(_t(vals[0]), k, s, p, count_include_pad=True).numpy()


register(OpDef("pool2d", "other", _pool_infer, _pool_compute,
                lambda shapes, a, out: math.prod(out) * math.prod(per_dim(a, "kernel", 2, 1)), _pool_ref))


def reduce_stage(name: str, X: Reader, shape: Shape, axis: int, fn: Callable[[Any, Any], Any]) -> te.Tensor:
    """An auxiliary stage over the logical shape with ``axis`` reduced to 1."""
    red = tuple(1 if d == axis else n for d, n in enumerate(shape))

    def f(*idx):
        r = reduce_axis(shape[axis], f"r_{name}")
        return fn([r if d == axis else i for d, i in enumerate(idx)], r)

    return te.compute(red, f, name=name)


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
    mean = reduce_stage("ln_mean", X, x, axis, lambda i, r: te.sum(X(i) * _f32(1.0 / n), axis=r))
    var = reduce_stage("ln_var", X, x, axis, lambda i, r: te.sum(
        (X(i) - mean[(*i[:-1], 0)]) * (X(i) - mean[(*i[:-1], 0)]) * _f32(1.0 / n), axis=r))

    def body(idx):
        red = (*idx[:-1], 0)
        return (X(idx) - mean[red]) * tvm.tirx.rsqrt(var[red] + _f32(eps)) * G([idx[-1]]) + B([idx[-1]])

    return body


def _ln_ref(vals, a):
    x, g, b = (np.asarray(v, np.float64) for v in vals)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + a.get("eps", 1e-5)) * g + b


register(OpDef("layer_norm", "other", lambda shapes, a: shapes[0], _ln_compute,
                lambda shapes, a, out: 8 * math.prod(out), _ln_ref))


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


########## Ops for imported models: activations, per-axis scale, concatenation ##########

elementwise("sigmoid", fast_sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), 4)
elementwise("tanh", fast_tanh, np.tanh, 5)
elementwise("erf", fast_erf, lambda x: _torch().erf(_t(x)).numpy(), 5)
elementwise("clip", lambda x, lo, hi: te.min(te.max(x, _f32(lo)), _f32(hi)), lambda x, lo, hi: np.clip(x, lo, hi), 2)


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


def names_for(dims: str, rank: int) -> Sequence[str]:
    """Dim names of a tensor for layouts (one letter each; made unique)."""
    if len(dims) != rank:
        dims = "ABCDEFGH"[:rank]
    seen: dict[str, int] = {}
    out = []
    for ch in dims:
        seen[ch] = seen.get(ch, 0) + 1
        out.append(ch if seen[ch] == 1 else f"{ch}{seen[ch]}")
    return out


########## Opaque ops ##########
# TVM's legalized TIR for an imported op the library does not model: its ``call`` attribute (an
# ``opaque.OpaqueCall``) gives the shape and the reference; lowering takes its PrimFunc as the kernel.

def _refuse_compute(readers, shapes, a, out):
    raise GraphError(f"{a['op']} is an opaque kernel: it has no TE definition")


register(OpDef("opaque", "opaque", infer=lambda shapes, a: a["call"].out_shape, compute=_refuse_compute,
                flops=lambda shapes, a, out: math.prod(out), reference=lambda vals, a: a["call"].reference(vals),
                labeler=lambda a: a["op"]))
