"""A training step as one compiled network (``engine.build.training``): every output of the
network against the step graph's NumPy reference on random data, and 20 SGD steps with the
updated parameters fed back, against PyTorch's SGD from the same weights."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engine.build.training import compile_step
from workbench.engine.models.training_examples import EXAMPLES, example_step, initial_values, torch_trainer


def _compiled(name):
    step = example_step(name)
    values = {**step.graph.random_inputs(0), **initial_values(step, seed=1)}
    return compile_step(step, values), values


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_twenty_steps_lower_the_loss_exactly_as_pytorch_does(name):
    compiled, values = _compiled(name)
    want = compiled.step.graph.reference(values)
    got = compiled.run(values)
    for o in compiled.step.graph.outputs:
        np.testing.assert_allclose(got[o], want[o], rtol=1e-5, atol=1e-6, err_msg=o)
    losses, params = compiled.train(values, 20)
    run, twin = torch_trainer(name, compiled.step, values)
    expected = [run() for _ in range(20)]
    np.testing.assert_allclose(losses, expected, rtol=0, atol=1e-4)
    assert losses[-1] < 0.9 * losses[0]  # it learns
    for p in compiled.step.params:
        np.testing.assert_allclose(params[p], twin[p].detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=p)


@pytest.mark.slow
def test_a_step_count_below_one_is_refused():
    compiled, values = _compiled("lltm")
    with pytest.raises(ValueError, match="at least 1, got 0"):
        compiled.train(values, 0)


def test_a_program_of_another_graph_is_refused():
    from workbench.engine.base.errors import BuildError
    from workbench.engine.build.program import make_program

    step = example_step("lltm")
    other = make_program(example_step("lltm").graph)
    with pytest.raises(BuildError, match="not of the step lltm_step"):
        compile_step(step, step.graph.random_inputs(0), program=other)
