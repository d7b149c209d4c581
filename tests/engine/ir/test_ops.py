"""Every operator of the library: its TVM definition, built with LLVM, against an independent
NumPy implementation written here (and the library's own reference against the same), on random
data; exact FLOP counts against closed forms for each complex operator type. The test fails if
an operator of the library has no case here."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.ir.ops import OPS
from workbench.engine.ir.ops_decoder import DECODER_OPS
from workbench.engine.build.program import make_program

TARGET = {"kind": "llvm", "num-cores": 2}


########## Independent NumPy implementations ##########

def _tup(v, nd):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd


def np_conv(x, w, stride=1, padding=0, dilation=1, groups=1, **_):
    """Direct convolution: one strided slice of the padded input per kernel tap."""
    nd = x.ndim - 2
    s, p, d = _tup(stride, nd), _tup(padding, nd), _tup(dilation, nd)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(q, q) for q in p])
    o, cg, ks = w.shape[0], w.shape[1], w.shape[2:]
    og = o // groups
    out_sp = [(xp.shape[2 + j] - d[j] * (ks[j] - 1) - 1) // s[j] + 1 for j in range(nd)]
    out = np.zeros((x.shape[0], o, *out_sp))
    for g in range(groups):
        xg, wg = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og].astype(np.float64)
        for taps in itertools.product(*map(range, ks)):
            sl = tuple(slice(t * dd, t * dd + ss * (n - 1) + 1, ss) for t, dd, ss, n in zip(taps, d, s, out_sp))
            patch = xg[(slice(None), slice(None), *sl)]
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch, wg[(slice(None), slice(None), *taps)])
    return out


def np_conv_transpose(x, w, stride=1, padding=0, output_padding=0, **_):
    """Scatter form: input element i adds w * x[i] at output i*stride + tap - padding."""
    nd = x.ndim - 2
    s, p, op = _tup(stride, nd), _tup(padding, nd), _tup(output_padding, nd)
    ins, ks = x.shape[2:], w.shape[2:]
    full = [(ins[j] - 1) * s[j] + ks[j] + op[j] for j in range(nd)]
    buf = np.zeros((x.shape[0], w.shape[1], *full))
    for taps in itertools.product(*map(range, ks)):
        sl = tuple(slice(t, t + ss * (n - 1) + 1, ss) for t, ss, n in zip(taps, s, ins))
        buf[(slice(None), slice(None), *sl)] += np.einsum("nc...,co->no...", x.astype(np.float64),
                                                          w[(slice(None), slice(None), *taps)].astype(np.float64))
    out = [full[j] - 2 * p[j] for j in range(nd)]
    return buf[(slice(None), slice(None), *(slice(p[j], p[j] + out[j]) for j in range(nd)))]


def np_pool(x, kernel, stride=1, padding=0, mode="max", **_):
    k, s, p = _tup(kernel, 2), _tup(stride, 2), _tup(padding, 2)
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])], constant_values=fill)
    oh, ow = [(xp.shape[2 + j] - k[j]) // s[j] + 1 for j in range(2)]
    win = np.stack([xp[:, :, a:a + s[0] * (oh - 1) + 1:s[0], b:b + s[1] * (ow - 1) + 1:s[1]]
                    for a in range(k[0]) for b in range(k[1])])
    return win.max(0) if mode == "max" else win.sum(0) / (k[0] * k[1])


def np_softmax(x, axis=-1, **_):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_layer_norm(x, g, b, eps=1e-5, **_):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


def np_gelu(x, **_):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def np_matmul(a, b, transpose_b=False, **_):
    return np.matmul(a.astype(np.float64), np.swapaxes(b, -1, -2) if transpose_b else b)


def np_bias_add(x, b, axis=1, **_):
    shape = [1] * x.ndim
    shape[axis % x.ndim] = -1
    return x + b.reshape(shape)


def np_pad_op(x, before, after, value=0.0, **_):
    return np.pad(x, list(zip(before, after)), constant_values=value)


NUMPY = {
    "conv1d": np_conv, "conv2d": np_conv, "conv3d": np_conv,
    "conv_transpose1d": np_conv_transpose, "conv_transpose2d": np_conv_transpose, "conv_transpose3d": np_conv_transpose,
    "matmul": np_matmul,
    "relu": lambda x, **_: np.maximum(x, 0),
    "sigmoid": lambda x, **_: 1 / (1 + np.exp(-x)), "tanh": lambda x, **_: np.tanh(x),
    "erf": lambda x, **_: np.vectorize(math.erf)(x),
    "clip": lambda x, lo, hi, **_: np.minimum(np.maximum(x, lo), hi),
    "scale_axis": lambda x, s, axis=1, **_: x * s.reshape([-1 if d == axis % x.ndim else 1 for d in range(x.ndim)]),
    "concat": lambda *xs, axis=0, **_: np.concatenate(xs, axis),
    "relu6": lambda x, **_: np.minimum(np.maximum(x, 0), 6),
    "gelu": np_gelu,
    "scale": lambda x, factor, **_: x * factor,
    "add": lambda x, y, **_: x + y,
    "multiply": lambda x, y, **_: x * y,
    "layout_transform": lambda x, **_: x,
    "bias_add": np_bias_add,
    "pad": np_pad_op,
    "pool2d": np_pool,
    "softmax": np_softmax,
    "layer_norm": np_layer_norm,
    "reshape": lambda x, shape, **_: x.reshape(shape),
    "transpose": lambda x, perm, **_: x.transpose(perm),
}


########## One small graph per case ##########

def _one(type_: str, shapes: list[tuple], consts: tuple[int, ...] = (), scale: float = 1.0, **attrs):
    """A graph of one op on inputs (or constants, by position) of these shapes."""
    def build():
        b = GraphBuilder(type_)
        names = [(b.const if i in consts else b.input)(f"x{i}", s) for i, s in enumerate(shapes)]
        b.op("op", type_, *names, **attrs)
        return b.build()
    build.attrs, build.scale = attrs, scale
    return build


CASES = {
    "conv1d": _one("conv1d", [(2, 6, 17), (8, 6, 3)], (1,), stride=2, padding=1),
    "conv1d_dil": _one("conv1d", [(1, 4, 20), (5, 4, 3)], (1,), dilation=3, padding=2),
    "conv2d": _one("conv2d", [(1, 5, 11, 9), (7, 5, 3, 3)], (1,), padding=1),
    "conv2d_stride3_rect": _one("conv2d", [(2, 3, 13, 10), (4, 3, 2, 3)], (1,), stride=(3, 2), padding=(1, 0)),
    "conv2d_dil": _one("conv2d", [(1, 4, 12, 12), (6, 4, 3, 3)], (1,), padding=2, dilation=2),
    "conv2d_grp_dil": _one("conv2d", [(1, 8, 12, 12), (8, 4, 3, 3)], (1,), padding=2, dilation=2, groups=2),
    "conv2d_grp": _one("conv2d", [(1, 12, 7, 7), (8, 3, 3, 3)], (1,), padding=1, groups=4),
    "conv2d_dep": _one("conv2d", [(1, 6, 9, 9), (6, 1, 3, 3)], (1,), padding=1, stride=2, groups=6, depthwise=True),
    "conv3d": _one("conv3d", [(1, 3, 5, 6, 6), (4, 3, 3, 3, 3)], (1,), padding=1),
    "conv3d_stride": _one("conv3d", [(1, 2, 6, 7, 5), (3, 2, 2, 3, 2)], (1,), stride=2),
    "conv_transpose1d": _one("conv_transpose1d", [(2, 3, 7), (3, 4, 5)], (1,), stride=3, padding=1, output_padding=2),
    "conv_transpose2d": _one("conv_transpose2d", [(1, 4, 5, 5), (4, 3, 4, 4)], (1,), stride=2, padding=1),
    "conv_transpose2d_op": _one("conv_transpose2d", [(2, 3, 4, 6), (3, 5, 3, 3)], (1,), stride=2, padding=1,
                                output_padding=1),
    "conv_transpose3d": _one("conv_transpose3d", [(1, 3, 3, 3, 3), (3, 2, 4, 4, 4)], (1,), stride=2, padding=1),
    "matmul": _one("matmul", [(9, 13), (13, 7)], (1,)),
    "matmul_batched": _one("matmul", [(3, 5, 6), (3, 6, 4)]),
    "matmul_batched_tb": _one("matmul", [(2, 5, 6), (2, 7, 6)], transpose_b=True),
    "relu": _one("relu", [(3, 17)]),
    "sigmoid": _one("sigmoid", [(3, 17)], scale=4.0), "tanh": _one("tanh", [(3, 17)], scale=3.0),
    "erf": _one("erf", [(3, 17)], scale=3.0), "clip": _one("clip", [(3, 17)], lo=-0.3, hi=0.4),
    "scale_axis": _one("scale_axis", [(2, 5, 4), (5,)], (1,), axis=1),
    "concat": _one("concat", [(2, 3, 4), (2, 5, 4), (2, 1, 4)], axis=1),
    "relu6": _one("relu6", [(3, 17)], scale=8.0),  # values beyond 6 too
    "gelu": _one("gelu", [(3, 17)], scale=3.0),
    "scale": _one("scale", [(3, 17)], factor=0.25),
    "add": _one("add", [(3, 17), (3, 17)]),
    "multiply": _one("multiply", [(3, 17), (3, 17)]),
    "layout_transform": _one("layout_transform", [(3, 17)]),
    "bias_add": _one("bias_add", [(2, 5, 4), (5,)], (1,), axis=1),
    "bias_add_last": _one("bias_add", [(3, 4, 6), (6,)], (1,), axis=-1),
    "pad": _one("pad", [(1, 2, 5, 5)], before=(0, 0, 2, 1), after=(0, 0, 1, 3)),
    "pad_value": _one("pad", [(4, 3)], before=(1, 0), after=(2, 2), value=0.5),
    "pool2d_max": _one("pool2d", [(1, 3, 9, 9)], kernel=3, stride=2, padding=1, mode="max"),
    "pool2d_avg": _one("pool2d", [(1, 3, 8, 8)], kernel=2, stride=2, mode="avg"),
    "pool2d_avg_pad": _one("pool2d", [(1, 2, 7, 7)], kernel=3, stride=2, padding=1, mode="avg"),
    "softmax": _one("softmax", [(4, 19)], scale=4.0, axis=-1),
    "softmax_axis0": _one("softmax", [(5, 3, 4)], axis=0),
    "layer_norm": _one("layer_norm", [(6, 16), (16,), (16,)], (1, 2)),
    "reshape": _one("reshape", [(2, 3, 4)], shape=(6, 4)),
    "transpose": _one("transpose", [(2, 3, 4)], perm=(2, 0, 1)),
}


def _values(graph, seed=7, scale=1.0):
    vals = graph.random_inputs(seed=seed)
    return {k: (v * scale).astype(np.float32) for k, v in vals.items()}


def test_every_operator_of_the_library_has_a_case_and_a_numpy_implementation():
    # opaque: TVM's own TIR of an imported call (tests/engine/ir/test_opaque.py); the decoder ops:
    # tests/engine/ir/test_ops_decoder.py; expression ops (expr_*), whose reference interprets the
    # user's expression: tests/engine/test_expr_*.py
    library = {t for t in OPS if not t.startswith("expr_")} - {"opaque", *DECODER_OPS}
    covered = {build().node("op").type for build in CASES.values()}
    assert covered == library, f"no test case for {sorted(library - covered)}"
    assert set(NUMPY) == library


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_tvm_definition_and_the_reference_match_numpy_on_random_data(case):
    build = CASES[case]
    graph = build()
    node = graph.node("op")
    values = _values(graph, scale=build.scale)
    assert all(np.count_nonzero(v) == v.size and np.unique(v).size > 1 for v in values.values())  # random
    want = NUMPY[node.type](*(values[i] for i in node.inputs), **node.kwargs)
    assert want.shape == graph.tensor("op").shape  # shape inference agrees with NumPy
    assert np.abs(want).max() > 0
    tol = dict(rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(want).max())))
    np.testing.assert_allclose(graph.reference(values)["op"], want, **tol)
    built = make_program(graph).build(TARGET)
    got = built.run(values)["op"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, **tol)
    ver = built.verify(values)
    assert ver.ok and ver.max_rel_error < 1e-4


def test_the_numpy_convolutions_agree_with_pytorch():
    """The NumPy implementations above, checked once against PyTorch (so they are not wrong in
    the same way as an operator written from the same formula)."""
    torch = pytest.importorskip("torch")
    f = torch.nn.functional
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 8, 9, 10)), rng.standard_normal((6, 4, 3, 2))
    want = f.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)
    np.testing.assert_allclose(np_conv(x, w, (2, 1), (1, 2), (2, 1), 2), want.numpy(), rtol=1e-10, atol=1e-10)
    x, w = rng.standard_normal((1, 3, 4, 5, 3)), rng.standard_normal((3, 2, 3, 4, 2))
    want = f.conv_transpose3d(torch.from_numpy(x), torch.from_numpy(w), stride=(2, 3, 1), padding=(1, 1, 0),
                              output_padding=(1, 0, 0))
    np.testing.assert_allclose(np_conv_transpose(x, w, (2, 3, 1), (1, 1, 0), (1, 0, 0)), want.numpy(), rtol=1e-10,
                               atol=1e-10)
    x = rng.standard_normal((1, 2, 7, 7))
    np.testing.assert_allclose(np_pool(x, 3, 2, 1, "max"), f.max_pool2d(torch.from_numpy(x), 3, 2, 1).numpy())
    np.testing.assert_allclose(np_pool(x, 3, 2, 1, "avg"), f.avg_pool2d(torch.from_numpy(x), 3, 2, 1).numpy())
    np.testing.assert_allclose(np_gelu(x), f.gelu(torch.from_numpy(x)).numpy(), rtol=1e-12)


########## FLOP counts: closed forms ##########

def _conv_out(n, k, s=1, p=0, d=1):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _flops_cases():
    # (label, graph builder, expected FLOPs, expected output shape); 2 FLOPs per multiply-add
    c1 = _conv_out(17, 3, 2, 1)
    yield "C1D", _one("conv1d", [(2, 6, 17), (8, 6, 3)], (1,), stride=2, padding=1), 2 * 2 * 8 * c1 * 6 * 3, (2, 8, c1)
    h, w = _conv_out(224, 7, 2, 3), _conv_out(224, 7, 2, 3)
    yield ("C2D", _one("conv2d", [(1, 3, 224, 224), (64, 3, 7, 7)], (1,), stride=2, padding=3),
           2 * 64 * 112 * 112 * 3 * 7 * 7, (1, 64, h, w))
    h = _conv_out(28, 3, 1, 1)
    yield ("DEP", _one("conv2d", [(2, 144, 28, 28), (144, 1, 3, 3)], (1,), padding=1, groups=144, depthwise=True),
           2 * 2 * 144 * h * h * 3 * 3, (2, 144, h, h))
    yield ("GRP", _one("conv2d", [(1, 128, 28, 28), (128, 4, 3, 3)], (1,), padding=1, groups=32),
           2 * 128 * 28 * 28 * (128 // 32) * 9, (1, 128, 28, 28))
    h = _conv_out(28, 3, 1, 2, 2)
    yield ("DIL", _one("conv2d", [(1, 64, 28, 28), (64, 64, 3, 3)], (1,), padding=2, dilation=2),
           2 * 64 * h * h * 64 * 9, (1, 64, h, h))
    d, h = _conv_out(8, 3, 2, 1), _conv_out(28, 3, 2, 1)
    yield ("C3D", _one("conv3d", [(1, 64, 8, 28, 28), (32, 64, 3, 3, 3)], (1,), stride=2, padding=1),
           2 * 32 * d * h * h * 64 * 27, (1, 32, d, h, h))
    yield "GMM", _one("matmul", [(96, 80), (80, 112)], (1,)), 2 * 96 * 112 * 80, (96, 112)
    yield "GMM", _one("matmul", [(4, 96, 80), (4, 112, 80)], transpose_b=True), 2 * 4 * 96 * 112 * 80, (4, 96, 112)
    # transposed convs with out = stride * in: every input element meets every (output channel, tap) once
    yield ("T2D", _one("conv_transpose2d", [(1, 128, 16, 16), (128, 64, 4, 4)], (1,), stride=2, padding=1),
           2 * 128 * 16 * 16 * 64 * 16, (1, 64, 32, 32))
    yield ("T3D", _one("conv_transpose3d", [(2, 32, 4, 16, 16), (32, 16, 4, 4, 4)], (1,), stride=2, padding=1),
           2 * 2 * 32 * 4 * 16 * 16 * 16 * 64, (2, 16, 8, 32, 32))
    # K=5 not a multiple of s=2, p=1: of the 5 taps, phase 0 has k = 0, 2, 4 and phase 1 has
    # k = 1, 3; (y + 1) mod 2 is 1 for the 12 even y < 23 and 0 for the 11 odd ones
    yield ("T1D", _one("conv_transpose1d", [(2, 6, 11), (6, 4, 5)], (1,), stride=2, padding=1),
           2 * 2 * 6 * 4 * (12 * 2 + 11 * 3), (2, 4, 23))


@pytest.mark.parametrize("label, build, flops, shape", list(_flops_cases()),
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(_flops_cases())])
def test_flop_counts_equal_the_closed_forms(label, build, flops, shape):
    g = build()
    node = g.node("op")
    assert node.kind == "complex" and node.label == label
    assert g.tensor("op").shape == shape
    assert g.flops("op") == flops


def test_flops_of_the_stem_and_of_simple_ops():
    from workbench.engine.models import zoo

    g = zoo.load("r18_stem")
    assert g.flops("conv") == 2 * 64 * 112 * 112 * 3 * 7 * 7  # 118 M multiply-adds (paper's case study)
    assert g.flops("bias") == g.flops("relu") == 64 * 112 * 112
    assert g.flops("pad") == 0
    assert [g.node(n).kind for n in ("pad", "conv", "bias", "relu")] == ["other", "complex", "elementwise",
                                                                         "elementwise"]
