"""Derived gradients (``engine.ir.expr.grad``, ``backward``): every gradient of an op or a chain of
ops written as expressions, computed by the NumPy interpreter, against PyTorch's autograd on
random data with odd sizes; the linear system's answers for strided, dilated, grouped and
quasi-affine reads (guards only where the mapping is not onto)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from workbench.engine.ir.expr import backward_graph, expr_graph, read_expr

CONV = "conv: out[n, k, y, x] += inp[n, {group}c, {sy}*y + {dy}*r, {sx}*x + {dx}*s] * w[k, c, r, s]"


def _conv(stride=(1, 1), dilation=(1, 1), groups=1, cin=3, cout=4, size=(11, 9), kernel=(3, 2)):
    (sy, sx), (dy, dx) = stride, dilation
    group = f"(k // {cout // groups}) * {cin // groups} + " if groups > 1 else ""
    text = (f"input inp[2, {cin}, {size[0]}, {size[1]}]\ninput w[{cout}, {cin // groups}, {kernel[0]}, {kernel[1]}]\n"
            + CONV.format(group=group, sy=sy, sx=sx, dy=dy, dx=dx))
    return text, lambda inp, w: F.conv2d(inp, w, stride=stride, dilation=dilation, groups=groups)


def _capsule(caps, w):  # NeoFlow's capsule conv, stride 2: 4x4 pose matrices times 4x4 weights per tap
    win = caps.unfold(2, 3, 2).unfold(3, 3, 2)  # b, c, p, q, i, m, r, s
    return torch.einsum("bcpqimrs,kcrsmj->bkpqij", win, w)


def _lltm(x, h, c, wx, wh, b):
    i, o, cand = (x @ wx.T + h @ wh.T + b).chunk(3, dim=1)
    return torch.tanh(c + F.elu(cand) * torch.sigmoid(i)) * torch.sigmoid(o)


CASES = {
    "conv2d stride 2": _conv(stride=(2, 2)),
    "conv2d dilation 2": _conv(dilation=(2, 2)),
    "conv2d stride and dilation": _conv(stride=(2, 1), dilation=(1, 3), size=(13, 11)),
    "conv2d groups 3": _conv(groups=3, cin=6, cout=9, stride=(1, 2)),
    "depthwise conv": ("input inp[2, 5, 9, 7]\ninput w[5, 3, 3]\n"
                       "dw: out[n, c, y, x] += inp[n, c, y + r, x + s] * w[c, r, s]",
                       lambda inp, w: F.conv2d(inp, w[:, None], groups=5)),
    "transposed conv": ("input inp[1, 3, 5, 4]\ninput w[3, 5, 3, 3]\n"
                        "up[1, 5, 11, 9]: out[n, k, h, x] += where(h >= r and (h - r) % 2 == 0 and (h - r) // 2 < 5 "
                        "and x >= s and (x - s) % 2 == 0 and (x - s) // 2 < 4, "
                        "inp[n, c, (h - r) // 2, (x - s) // 2] * w[c, k, r, s], 0.0) for c < 3, r < 3, s < 3",
                        lambda inp, w: F.conv_transpose2d(inp, w, stride=2)),
    "matmul": ("input a[5, 7]\ninput b[7, 3]\nmm: out[i, j] += a[i, k] * b[k, j]", lambda a, b: a @ b),
    "capsule conv": ("input caps[1, 3, 9, 7, 4, 4]\ninput w[2, 3, 3, 3, 4, 4]\n"
                     "capsconv: out[b, k, p, q, i, j] += caps[b, c, 2*p + r, 2*q + s, i, m] * w[k, c, r, s, m, j]",
                     _capsule),
    "max pooling 3x3 stride 2": ("input a[2, 3, 9, 11]\n"
                                 "pool: out[n, c, p, q] max= a[n, c, 2*p + u, 2*q + v] for u < 3, v < 3",
                                 lambda a: F.max_pool2d(a, 3, 2)),
    "max pooling of a computed value": ("input a[2, 3, 9, 11]\npool: out[n, c, p, q] max= "
                                        "tanh(a[n, c, 2*p + u, 2*q + v]) * 1.5 for u < 3, v < 3",
                                        lambda a: F.max_pool2d(torch.tanh(a) * 1.5, 3, 2)),
    "layer norm": ("input x[5, 7]\ninput g[7]\ninput b[7]\n"
                   "mu: out[i] += x[i, j] / 7\n"
                   "xc: out[i, j] = x[i, j] - mu[i]\n"
                   "var: out[i] += xc[i, j] * xc[i, j] / 7\n"
                   "y: out[i, j] = xc[i, j] * exp(-0.5 * log(var[i] + 0.00001)) * g[j] + b[j]",
                   lambda x, g, b: F.layer_norm(x, (7,), g, b, eps=1e-5)),
    "softmax": ("input x[3, 9]\n"
                "m: out[i] max= x[i, j]\n"
                "e: out[i, j] = exp(x[i, j] - m[i])\n"
                "s: out[i] += e[i, j]\n"
                "y: out[i, j] = e[i, j] / s[i]",
                lambda x: torch.softmax(x, -1)),
    "lltm cell": ("input x[3, 5]\ninput h[3, 7]\ninput c[3, 7]\ninput wx[21, 5]\ninput wh[21, 7]\ninput b[21]\n"
                  "gx: out[n, g] += x[n, k] * wx[g, k]\n"
                  "gh: out[n, g] += h[n, k] * wh[g, k]\n"
                  "pre: out[n, g] = gx[n, g] + gh[n, g] + b[g]\n"  # rows: input gate, output gate, candidate (ELU)
                  "cell[3, 7]: out[n, j] = c[n, j] + where(pre[n, 14 + j] > 0, pre[n, 14 + j], "
                  "exp(pre[n, 14 + j]) - 1.0) * sigmoid(pre[n, j])\n"
                  "hnew: out[n, j] = tanh(cell[n, j]) * sigmoid(pre[n, 7 + j])", _lltm),
    "concatenation": ("input x[3, 4]\ninput h[3, 5]\ninput w[6, 9]\n"
                      "mm[3, 6]: out[n, g] += where(j < 5, h[n, j], x[n, j - 5]) * w[g, j]",
                      lambda x, h, w: torch.cat([h, x], 1) @ w.T),
    "pixel shuffle then tanh": ("input inp[1, 8, 3, 5]\n"
                                "ps: out[n, c, h, x] = inp[n, c*4 + (h % 2)*2 + x % 2, h // 2, x // 2]\n"
                                "act: out[n, c, h, x] = tanh(ps[n, c, h, x]) * ps[n, c, h, x]",
                                lambda inp: torch.tanh(F.pixel_shuffle(inp, 2)) * F.pixel_shuffle(inp, 2)),
}


def backward(text: str):
    return backward_graph(expr_graph(read_expr(text), "t"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_gradient_matches_pytorch_autograd(case):
    text, fn = CASES[case]
    fwd = expr_graph(read_expr(text), "t")
    g = backward_graph(fwd)
    assert g.outputs == (*fwd.outputs, *(f"grad_{t}" for t in fwd.inputs))
    values = g.random_inputs(seed=1)
    got = g.reference(values)
    args = [torch.tensor(values[t], dtype=torch.float64, requires_grad=True) for t in fwd.inputs]
    out = fn(*args)
    (out * torch.tensor(values[f"grad_{fwd.outputs[0]}"], dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(got[fwd.outputs[0]], out.detach().numpy(), rtol=1e-4, atol=1e-5)
    for t, a in zip(fwd.inputs, args):
        want = a.grad.numpy()
        np.testing.assert_allclose(got[f"grad_{t}"], want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=t)


def _grads(text: str, shapes: dict, wrt: str):
    from workbench.engine.ir.expr import define, gradient

    op = define(text, shapes)
    return op, gradient(op, wrt, "fwd", "grad_fwd", shapes, f"grad_{wrt}")


def test_matmul_gradients_are_the_transposed_products():
    _, (ga,) = _grads("out[i, j] += a[i, k] * b[k, j]", {"a": (5, 7), "b": (7, 3)}, "a")
    _, (gb,) = _grads("out[i, j] += a[i, k] * b[k, j]", {"a": (5, 7), "b": (7, 3)}, "b")
    assert str(ga.op) == "grad_a[i, k] += grad_fwd[i, j] * b[k, j]" and not ga.guarded
    assert str(gb.op) == "grad_b[k, j] += grad_fwd[i, j] * a[i, k]" and gb.op.out_shape == (7, 3)


def test_a_stride_the_window_does_not_cover_is_non_invertible_and_says_so():
    _, (g,) = _grads("out[n, k, y, x] += inp[n, c, 2*y + r, x + s] * w[k, c, r, s]",
                     {"inp": (1, 2, 9, 5), "w": (3, 2, 3, 3)}, "inp")
    assert g.guarded and "non-invertible (a stride)" in g.op.note and "% 2 == 0" in str(g.op)
    assert dict(g.op.extents)["r"] == 3  # a new reduction axis over the kernel, not over the output rows


def test_a_window_that_covers_its_stride_recombines_without_a_reduction_over_it():
    # kernel 2, stride 2: r = h % 2, y = h // 2 (NeoFlow's x = s1*V + s2)
    _, (g,) = _grads("out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]",
                     {"inp": (1, 2, 8, 6), "w": (3, 2, 2, 2)}, "inp")
    assert g.op.reduction == ("k",) and not g.guarded
    _, (pool,) = _grads("out[n, p] max= a[n, 2*p + u] for u < 2", {"a": (2, 7)}, "a")
    assert pool.op.statement.reduce == "=" and "where(a[n, z1] == fwd[n, z1 // 2]" in str(pool.op)


def test_grouped_channels_and_a_pixel_shuffle_solve_by_mixed_radix():
    _, (g,) = _grads("out[n, k, y] += inp[n, (k // 3) * 2 + c, y + r] * w[k, c, r]",
                     {"inp": (1, 4, 7), "w": (6, 2, 3)}, "inp")
    assert not g.guarded and dict(g.op.extents)["m0"] == 3  # the group's 3 output channels, no more
    _, (p,) = _grads("out[n, c, h, x] = inp[n, c*4 + (h % 2)*2 + x % 2, h // 2, x // 2]", {"inp": (1, 8, 3, 5)}, "inp")
    assert p.op.statement.reduce == "=" and not p.guarded  # a permutation: every element read once


def test_a_repeated_index_reads_a_diagonal_and_sums_its_places():
    op, gs = _grads("out[i] += a[i, r] * a[r, r]", {"a": (5, 5)}, "a")
    assert [g.name for g in gs] == ["grad_a__1", "grad_a__2", "grad_a"]
    assert gs[1].guarded and "non-invertible (a repeat)" in gs[1].op.note and gs[2].guarded


FAMILIES = {  # one op per family: sliding window, max, quasi-affine, element-wise with broadcast, chained division
    "conv": ("out[n, k, y, x] += inp[n, c, 2*y + 2*r, x + s] * w[k, c, r, s]",
             {"inp": (1, 2, 9, 6), "w": (3, 2, 3, 2)}),
    "max": ("out[n, p] max= a[n, 2*p + u] for u < 3", {"a": (2, 9)}),
    "quasi-affine": ("out[n, c, h] = inp[n, c*3 + h % 3, h // 3] * w[c, h % 2]", {"inp": (1, 6, 5), "w": (2, 2)}),
    "element-wise": ("out[i, j] = sigmoid(a[i, j]) * log(b[j] * b[j] + 1.0) + min(a[i, j], b[j]) "
                     "- exp(a[i, j]) / (b[j] * b[j] + 2.0) + where(a[i, j] > b[j], tanh(a[i, j] * b[j]), -a[i, j])",
                     {"a": (3, 5), "b": (5,)}),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_gradients_match_finite_differences(family):
    from workbench.engine.ir.expr import define, evaluate, gradient

    text, shapes = FAMILIES[family]
    op = define(text, shapes)
    rng = np.random.default_rng(3)
    values = {t: rng.uniform(-1, 1, s) for t, s in shapes.items()}
    gout = rng.uniform(-1, 1, op.out_shape)

    def loss(vals):
        return float((evaluate(op, [vals[t] for t in op.inputs]) * gout).sum())

    for wrt in op.inputs:
        env = {**values, "fwd": evaluate(op, [values[t] for t in op.inputs]), "grad_fwd": gout}
        for g in gradient(op, wrt, "fwd", "grad_fwd", shapes, "grad"):
            env[g.name] = evaluate(g.op, [env[t] for t in g.op.inputs])
        for flat in rng.choice(values[wrt].size, min(6, values[wrt].size), replace=False):
            k = np.unravel_index(flat, values[wrt].shape)
            up, down = ({**values, wrt: values[wrt].copy()} for _ in range(2))
            up[wrt][k] += 1e-6
            down[wrt][k] -= 1e-6
            assert env["grad"][k] == pytest.approx((loss(up) - loss(down)) / 2e-6, rel=1e-5, abs=1e-7), (wrt, k)


@pytest.mark.parametrize("case", ["conv2d stride and dilation", "transposed conv", "max pooling of a computed value",
                                  "softmax"])
def test_the_backward_graph_builds_with_tvm_and_matches_the_interpreter_buffer_by_buffer(case):
    from tests.buffers import check_stored_buffers
    from workbench.engine.layout.book import LayoutBook

    check_stored_buffers(backward(CASES[case][0]), LayoutBook())


def test_a_large_strided_conv_has_a_gradient_whose_guarded_reads_are_checked_dim_by_dim():
    # 512 x 7 points per spatial dim; the two dims together (12.8M) would be too many to enumerate
    op, (g,) = _grads("out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]",
                      {"inp": (1, 3, 512, 512), "w": (4, 3, 7, 7)}, "inp")
    assert g.op.out_shape == (1, 3, 512, 512) and g.guarded
    assert dict(g.op.extents) == {"n": 1, "c": 3, "z2": 512, "z3": 512, "k": 4, "r": 7, "s": 7}


def test_a_transposed_conv_has_a_strided_conv_for_its_input_gradient():
    # the forward guard (h - r) % 2 == 0 pins the remainder the solver introduced: no loop over it
    g = backward(CASES["transposed conv"][0])
    grad = g.node("grad_inp").kwargs["expr"]
    assert str(grad) == "grad_inp[n, c, z2, z3] += grad_up[n, k, r + 2 * z2, s + 2 * z3] * w[c, k, r, s]"
    assert grad.reduction == ("k", "r", "s") and not grad.note.count("non-invertible")


# stride, dilation, kernel, padding, groups: a padded 1-D conv whose gradients the solver derives
CONV1D = [(1, 1, 3, 0, 1), (2, 1, 3, 1, 1), (3, 1, 2, 0, 1), (2, 2, 3, 2, 1), (3, 2, 2, 1, 2), (1, 3, 3, 3, 3),
          (4, 1, 5, 2, 1), (2, 3, 1, 0, 2), (5, 1, 5, 0, 3), (3, 3, 4, 2, 1)]


@pytest.mark.parametrize("stride, dilation, kernel, pad, groups", CONV1D)
def test_padded_grouped_1d_conv_gradients_match_pytorch(stride, dilation, kernel, pad, groups):
    cin, cout, size = 3 * groups, 2 * groups, 17
    out = (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    at = f"{stride}*y + {dilation}*r - {pad}"
    text = (f"input inp[2, {cin}, {size}]\ninput w[{cout}, 3, {kernel}]\n"
            f"conv[2, {cout}, {out}]: out[n, k, y] += where({at} >= 0 and {at} < {size}, "
            f"inp[n, (k // 2) * 3 + c, {at}], 0.0) * w[k, c, r]")
    g = backward(text)
    values = g.random_inputs(seed=2)
    got = g.reference(values)
    inp, w = (torch.tensor(values[t], dtype=torch.float64, requires_grad=True) for t in ("inp", "w"))
    y = F.conv1d(inp, w, stride=stride, padding=pad, dilation=dilation, groups=groups)
    (y * torch.tensor(values["grad_conv"], dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(got["conv"], y.detach().numpy(), rtol=1e-4, atol=1e-5)
    for t, leaf in (("inp", inp), ("w", w)):
        np.testing.assert_allclose(got[f"grad_{t}"], leaf.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=t)
