"""The training-step graph (``engine.models.training``): its inputs and outputs, the loss and
the SGD update computed by the NumPy reference against PyTorch autograd, and its errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.engine.base.errors import GraphError
from workbench.engine.ir.expr import expr_graph, read_expr
from workbench.engine.models.training import training_step

TWO_OUTPUTS = """input x[3, 5]
input w[4, 5]
input v[5]
y: out[i, k] += x[i, j] * w[k, j]
z: out[i, j] = tanh(x[i, j] * v[j])
"""


def _model(text: str = TWO_OUTPUTS):
    return expr_graph(read_expr(text), "m")


def test_the_step_takes_batch_targets_params_and_returns_the_loss_and_the_updates():
    step = training_step(_model(), ["w", "v"], 0.25)
    g = step.graph
    assert g.inputs == ["x", "target_y", "target_z", "w", "v"]
    assert g.outputs == ("loss", "new_w", "new_v") and g.tensors["loss"].shape == (1,)
    assert (step.batch, step.targets, step.params) == (("x",), ("target_y", "target_z"), ("w", "v"))
    # the batch's gradient is derived and dropped; d loss / d loss is the constant 1
    assert "grad_x" not in g.tensors and g.constants == ["grad_loss"]
    assert all("expr" in n.kwargs for n in g.nodes)


def test_loss_and_update_match_pytorch_autograd():
    step = training_step(_model(), ["w", "v"], 0.25)
    values = step.graph.random_inputs(seed=3)
    got = step.graph.reference(values)
    t = {k: torch.tensor(values[k], dtype=torch.float64, requires_grad=k in ("w", "v")) for k in step.graph.inputs}
    loss = (torch.nn.functional.mse_loss(t["x"] @ t["w"].T, t["target_y"])
            + torch.nn.functional.mse_loss(torch.tanh(t["x"] * t["v"]), t["target_z"]))
    loss.backward()
    np.testing.assert_allclose(got["loss"], [loss.item()], rtol=1e-5)
    for p in ("w", "v"):
        want = t[p].detach().numpy() - 0.25 * t[p].grad.numpy()
        np.testing.assert_allclose(got[f"new_{p}"], want, rtol=1e-5, atol=1e-6, err_msg=p)


@pytest.mark.parametrize("params, lr, message", [
    (["q"], 0.1, "parameter q is not an input of m"),
    ([], 0.1, "at least one parameter"),
    (["w"], 0.0, "positive number, got 0.0"),
    (["w"], float("nan"), "positive number, got nan"),
])
def test_bad_parameters_or_learning_rates_are_refused(params, lr, message):
    with pytest.raises(GraphError, match=message):
        training_step(_model(), params, lr)


def test_a_name_the_step_needs_is_refused():
    with pytest.raises(GraphError, match="already has a tensor loss"):
        training_step(_model("input x[3]\ninput w[3]\nloss: out[i] = x[i] * w[i]\n"), ["w"], 0.1)
