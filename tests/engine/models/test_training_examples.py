"""The training examples (``engine.models.training_examples``): each ``.expr`` model against its
PyTorch twin on random data, and the twin's SGD step against the step graph's reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.engine.models.training_examples import (ALL_EXAMPLES, EXAMPLES, example_graph, example_step,
                                                       initial_values, torch_trainer)


@pytest.mark.parametrize("name", sorted(ALL_EXAMPLES))  # the benchmark's large ones too
def test_the_model_matches_its_pytorch_twin(name):
    g = example_graph(name)
    values = g.random_inputs(seed=5)
    got = g.reference(values)
    outs = ALL_EXAMPLES[name].twin({t: torch.tensor(values[t]) for t in g.inputs})
    assert len(outs) == len(g.outputs)
    for o, want in zip(g.outputs, outs):
        scale = max(1.0, float(np.abs(want.numpy()).max()))  # float32 sums over the larger models
        np.testing.assert_allclose(got[o], want.numpy(), rtol=1e-4, atol=1e-5 * scale, err_msg=o)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_one_twin_step_is_the_graphs_step(name):
    step = example_step(name)
    values = initial_values(step, seed=2)
    want = step.graph.reference({**step.graph.random_inputs(0), **values})
    run, params = torch_trainer(name, step, values)
    assert run() == pytest.approx(float(want["loss"][0]), rel=1e-5)
    for p, new in step.updates.items():
        np.testing.assert_allclose(params[p].detach().numpy(), want[new], rtol=1e-4, atol=1e-6, err_msg=p)


def test_initial_parameters_are_scaled_by_fan_in():
    step = example_step("lltm")
    values = initial_values(step, seed=0)
    assert set(values) == set(step.graph.inputs)
    assert 0.5 / np.sqrt(11) < np.abs(values["W"]).max() <= 1 / np.sqrt(11) and np.abs(values["b"]).max() > 0.5
