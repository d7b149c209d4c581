"""The training examples (from NeoFlow's evaluation), each an ``.expr`` model in ``examples/``
with a PyTorch twin computing the same outputs from the same values:

- ``lltm``: the LLTM cell of PyTorch's C++-extension tutorial (``examples/lltm_cell.expr``);
- ``capsnet``: a small capsule-conv network (``examples/capsnet.expr``).

``initial_values`` draws a batch, targets and parameters (scaled by 1/sqrt(fan-in), so that the
activations do not saturate); ``torch_trainer`` is the twin's SGD step, eager or compiled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F

from ..ir.expr import expr_graph, read_expr
from ..ir.graph import Graph
from .training import TrainingStep, training_step

__all__ = ["EXAMPLES", "LARGE", "ALL_EXAMPLES", "EXAMPLES_DIR", "Example", "example_graph", "example_step", "initial_values",
           "torch_trainer"]

EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples"


def _lltm(v: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    gates = F.linear(torch.cat([v["h"], v["x"]], dim=1), v["W"], v["b"]).chunk(3, dim=1)
    new_c = v["c"] + F.elu(gates[2]) * torch.sigmoid(gates[0])
    return (torch.tanh(new_c) * torch.sigmoid(gates[1]),)


def _capsnet(v: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    # each capsule conv as one matmul over (c, r, s, m): faster in PyTorch than its einsum here
    caps, w1, w2 = v["caps"], v["w1"], v["w2"]
    win = caps.unfold(2, 3, 2).unfold(3, 3, 2)  # b, c, p, q, i, m, r, s
    b, c, p, q, i, m, r, s = win.shape
    k, j = w1.shape[0], w1.shape[-1]
    rows = win.permute(0, 2, 3, 4, 1, 6, 7, 5).reshape(b * p * q * i, c * r * s * m)
    conv = (rows @ w1.permute(1, 2, 3, 4, 0, 5).reshape(c * r * s * m, k * j)).reshape(b, p, q, i, k, j)
    act = torch.tanh(conv.permute(0, 4, 1, 2, 3, 5))  # b, k, p, q, i, j
    k2 = w2.shape[0]
    rows2 = act.permute(0, 4, 1, 2, 3, 5).reshape(b * i, -1)  # (b, i) by (c, p, q, m)
    out = (rows2 @ w2.permute(1, 2, 3, 4, 0, 5).reshape(rows2.shape[1], k2 * j)).reshape(b, i, k2, j)
    return (out.permute(0, 2, 1, 3),)


@dataclass(frozen=True)
class Example:
    """A training example: its ``.expr`` file, the inputs it learns, an SGD learning rate, and
    its PyTorch twin (input name -> tensor, to the model's outputs in graph order)."""

    name: str
    file: str
    params: tuple[str, ...]
    lr: float
    twin: Callable[[Mapping[str, torch.Tensor]], tuple[torch.Tensor, ...]]


EXAMPLES = {e.name: e for e in (Example("lltm", "lltm_cell.expr", ("W", "b"), 0.5, _lltm),
                                Example("capsnet", "capsnet.expr", ("w1", "w2"), 0.5, _capsnet))}
#: the same models at sizes where the arithmetic decides, not per-op overhead (the benchmark's)
LARGE = {e.name: e for e in (Example("lltm_large", "lltm_cell_large.expr", ("W", "b"), 0.1, _lltm),
                             Example("capsnet_large", "capsnet_large.expr", ("w1", "w2"), 0.1, _capsnet))}
ALL_EXAMPLES = {**EXAMPLES, **LARGE}


def example_graph(name: str) -> Graph:
    """The example's model, read from its ``.expr`` file."""
    e = ALL_EXAMPLES[name]
    return expr_graph(read_expr((EXAMPLES_DIR / e.file).read_text(), e.file), e.name)


def example_step(name: str) -> TrainingStep:
    """The example's SGD training step."""
    e = ALL_EXAMPLES[name]
    return training_step(example_graph(name), e.params, e.lr)


def initial_values(step: TrainingStep, seed: int = 0) -> dict[str, np.ndarray]:
    """Every input of ``step``: uniform in [-1, 1], parameters of rank > 1 divided by sqrt(fan-in)."""
    values = step.graph.random_inputs(seed)
    for p in step.params:
        shape = values[p].shape
        if len(shape) > 1:
            values[p] = (values[p] / np.float32(math.sqrt(math.prod(shape[1:])))).astype(np.float32)
    return {t: values[t] for t in step.graph.inputs}


def torch_trainer(name: str, step: TrainingStep, values: Mapping[str, np.ndarray], compiled: bool = False
                  ) -> tuple[Callable[[], float], dict[str, torch.Tensor]]:
    """The twin's SGD step on ``values`` (``step``'s inputs): a function running one step
    (forward, mean-squared-error loss, backward, ``torch.optim.SGD`` update) that returns the
    loss, and the parameters it updates in place. ``compiled``: the step under ``torch.compile``."""
    e = ALL_EXAMPLES[name]
    data = {t: torch.tensor(np.asarray(values[t], np.float32)) for t in (*step.batch, *step.targets)}
    params = {p: torch.tensor(np.asarray(values[p], np.float32), requires_grad=True) for p in step.params}
    opt = torch.optim.SGD(list(params.values()), lr=step.lr)
    targets = [data[t] for t in step.targets]

    def loss_of() -> torch.Tensor:
        outs = e.twin({**data, **params})
        return sum(F.mse_loss(o, t) for o, t in zip(outs, targets))

    forward = torch.compile(loss_of) if compiled else loss_of  # AOTAutograd compiles its backward too

    def run() -> float:
        opt.zero_grad(set_to_none=False)
        loss = forward()
        loss.backward()
        opt.step()
        return float(loss.detach())

    return run, params
