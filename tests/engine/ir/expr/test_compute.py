"""Expression ops computed three ways on random data with odd sizes: their TE definition built by
TVM (``engine.expr.compute``), the NumPy interpreter (``engine.expr.interp``) and a hand-written
PyTorch/NumPy reference: strided conv2d, matmul, relu times bias, max pooling (``max=``), a
capsule conv, and softmax and layer norm built from several expression ops."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engine.ir.expr import add_expr_op, evaluate
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.build.program import make_program

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _graph(inputs: dict, ops: list):
    b = GraphBuilder("t")
    for name, shape in inputs.items():
        b.input(name, shape)
    for name, text, *shape in ops:
        add_expr_op(b, name, text, shape[0] if shape else None)
    return b.build()


def _three_ways(inputs: dict, ops: list, rng) -> tuple[np.ndarray, np.ndarray, dict]:
    """The graph's one output by TVM and by the interpreter, and the random inputs."""
    g = _graph(inputs, ops)
    values = {k: rng.uniform(-1, 1, s).astype("float32") for k, s in inputs.items()}
    got = make_program(g).build().run(values)[g.outputs[0]]
    want = g.reference(values)[g.outputs[0]]
    return got, want, values


def _t(x: np.ndarray):
    return torch.from_numpy(np.asarray(x, np.float64))


def _close(got, want, by_hand, tol=1e-5):
    by_hand = np.asarray(by_hand, np.float64)
    scale = max(1.0, float(np.abs(by_hand).max()))
    assert got.shape == want.shape == by_hand.shape
    assert np.abs(by_hand).max() > 1e-3  # a real signal
    assert np.abs(want - by_hand).max() <= 1e-6 * scale  # the interpreter is exact (float32 inputs, float64 math)
    assert np.abs(got - by_hand).max() <= tol * scale  # TVM in float32 (and fast exp/tanh)


def test_strided_conv2d(rng):
    got, want, v = _three_ways({"inp": (2, 3, 11, 9), "w": (5, 3, 3, 2)},
                               [("conv", "out[n, k, y, x] += inp[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]")], rng)
    _close(got, want, F.conv2d(_t(v["inp"]), _t(v["w"]), stride=2).numpy())


def test_dilated_grouped_conv2d(rng):
    # 2 groups of 3 input channels, dilation 2: group g reads channels 3g..3g+2
    text = "out[n, k, y, x] += inp[n, (k // 2) * 3 + c, y + 2*r, x + 2*s] * w[k, c, r, s]"
    got, want, v = _three_ways({"inp": (1, 6, 9, 7), "w": (4, 3, 3, 2)}, [("conv", text)], rng)
    _close(got, want, F.conv2d(_t(v["inp"]), _t(v["w"]), dilation=2, groups=2).numpy())


def test_matmul(rng):
    got, want, v = _three_ways({"a": (7, 5), "b": (5, 3)}, [("mm", "out[i, j] += a[i, k] * b[k, j]")], rng)
    _close(got, want, v["a"].astype(np.float64) @ v["b"])


def test_relu_times_bias(rng):
    got, want, v = _three_ways({"a": (5, 7), "b": (7,)}, [("rb", "out[i, j] = max(a[i, j], 0) * b[j]")], rng)
    _close(got, want, np.maximum(v["a"], 0).astype(np.float64) * v["b"])


def test_max_pooling(rng):
    ops = [("pool", "out[n, c, y, x] max= a[n, c, 2*y + r, 2*x + s]", (1, 3, 3, 4))]
    got, want, v = _three_ways({"a": (1, 3, 7, 9)}, ops, rng)
    _close(got, want, F.max_pool2d(_t(v["a"]), 3, 2).numpy())


def test_softmax_from_expression_ops(rng):
    ops = [("mx", "out[i] max= x[i, j]"),
           ("e", "out[i, j] = exp(x[i, j] - mx[i])"),
           ("s", "out[i] += e[i, j]"),
           ("sm", "out[i, j] = e[i, j] / s[i]")]
    got, want, v = _three_ways({"x": (5, 13)}, ops, rng)
    _close(got, want, torch.softmax(_t(v["x"]), dim=1).numpy())


def test_layer_norm_from_expression_ops(rng):
    ops = [("mean", "out[i] += x[i, j] / 11"),
           ("var", "out[i] += (x[i, j] - mean[i]) * (x[i, j] - mean[i]) / 11"),
           ("ln", "out[i, j] = (x[i, j] - mean[i]) * exp(-0.5 * log(var[i] + 0.00001)) * g[j] + b[j]")]
    got, want, v = _three_ways({"x": (3, 11), "g": (11,), "b": (11,)}, ops, rng)
    _close(got, want, F.layer_norm(_t(v["x"]), (11,), _t(v["g"]), _t(v["b"]), eps=1e-5).numpy(), tol=1e-4)


def test_capsule_conv(rng):
    text = "out[b, k, p, q, i, j] += caps[b, c, 2*p + r, 2*q + s, i, m] * w[k, c, r, s, m, j]"
    got, want, v = _three_ways({"caps": (1, 3, 7, 5, 4, 3), "w": (2, 3, 3, 3, 3, 4)}, [("cc", text)], rng)
    by_hand = np.einsum("bcpqrsim,kcrsmj->bkpqij", np.lib.stride_tricks.sliding_window_view(
        v["caps"].astype(np.float64), (3, 3), axis=(2, 3))[:, :, ::2, ::2].transpose(0, 1, 2, 3, 6, 7, 4, 5),
        v["w"].astype(np.float64))
    _close(got, want, by_hand)


def test_functions_conditions_and_indices_as_values(rng):
    text = ("out[i, j] = where(a[i, j] > 0 and i % 2 == 0 or j >= 3, tanh(a[i, j]), sigmoid(a[i, j]) * i) "
            "+ log(a[i, j] * a[i, j] + 1) - min(b[j], 0.25) / 2")
    got, want, v = _three_ways({"a": (5, 7), "b": (7,)}, [("f", text)], rng)
    a, b = _t(v["a"]), _t(v["b"])
    i, j = torch.arange(5.0)[:, None], torch.arange(7.0)[None, :]
    cond = ((a > 0) & (i % 2 == 0)) | (j >= 3)
    by_hand = (torch.where(cond, torch.tanh(a), torch.sigmoid(a) * i) + torch.log(a * a + 1)
               - torch.clamp(b, max=0.25) / 2)
    _close(got, want, by_hand.numpy())


def test_the_interpreter_works_in_blocks_on_large_grids(monkeypatch, rng):
    from workbench.engine.ir.expr import define, interp

    op = define("out[i, j] += a[i, k] * b[k, j]", {"a": (9, 6), "b": (6, 5)})
    a, b = rng.uniform(-1, 1, (9, 6)), rng.uniform(-1, 1, (6, 5))
    calls = []
    fold = interp.fold_value
    monkeypatch.setattr(interp, "fold_value", lambda *args: calls.append(1) or fold(*args))
    monkeypatch.setattr(interp, "_BLOCK", 7)  # fewer points than one output element's reduction: one at a time
    np.testing.assert_allclose(evaluate(op, [a, b]), a @ b, rtol=1e-12)
    assert len(calls) == 9 * 5
    calls.clear()
    monkeypatch.setattr(interp, "_BLOCK", 60)  # two rows of the output (5 x 6 products each) per block
    np.testing.assert_allclose(evaluate(op, [a, b]), a @ b, rtol=1e-12)
    assert len(calls) == 5  # rows 0-1, 2-3, 4-5, 6-7, 8


def test_padding_by_a_guard_in_its_own_op_and_inside_the_reduction(rng):
    """A where on indices alone guards its reads: outside the input it takes the other side, in TVM
    (if_then_else evaluates one side) and in the interpreter (reads clamped, then discarded)."""
    pad = "out[n, c, h, w] = where(h >= 1 and h <= 11 and w >= 1 and w <= 9, x[n, c, h - 1, w - 1], 0)"
    ops = [("pad", pad, (1, 3, 13, 11)), ("conv", "out[n, k, y, x] += pad[n, c, 2*y + r, 2*x + s] * w[k, c, r, s]")]
    got, want, v = _three_ways({"x": (1, 3, 11, 9), "w": (4, 3, 3, 3)}, ops, rng)
    by_hand = F.conv2d(_t(v["x"]), _t(v["w"]), stride=2, padding=1).numpy()
    _close(got, want, by_hand)
    inline = ("out[n, k, y, x] += where(2*y + r >= 1 and 2*y + r <= 11 and 2*x + s >= 1 and 2*x + s <= 9, "
              "x[n, c, 2*y + r - 1, 2*x + s - 1], 0) * w[k, c, r, s]")
    g = _graph({"x": (1, 3, 11, 9), "w": (4, 3, 3, 3)}, [("conv", inline, (1, 4, 6, 5))])
    values = {"x": v["x"], "w": v["w"]}
    _close(make_program(g).build().run(values)["conv"], g.reference(values)["conv"], by_hand)
