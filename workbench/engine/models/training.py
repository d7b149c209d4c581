"""A training step of a model of expression ops, as one graph of expression ops (after NeoFlow):
the forward ops, a mean-squared-error loss against one ``target_<output>`` input per output, the
backward pass (``ir.expr.backward_graph``) and an SGD update ``new_<p> = p - lr * grad_<p>`` of
every parameter. The step's inputs are the batch, the targets and the parameters; its outputs
the loss (shape ``(1,)``) and the updated parameters, so a caller feeds those back step by step.

Only what the loss and the parameters' gradients need is kept: the gradients of the batch and
the targets are derived and dropped, and the loss's own gradient is the constant 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..base.errors import GraphError
from ..ir.expr import add_expr_op, backward_graph
from ..ir.expr.backward import grad_name
from ..ir.graph import Graph, GraphBuilder

__all__ = ["LOSS", "TrainingStep", "training_step", "mse_text", "target_name", "updated_name"]

#: the step's loss output
LOSS = "loss"


def target_name(output: str) -> str:
    """The input holding the training target of model output ``output``."""
    return f"target_{output}"


def updated_name(param: str) -> str:
    """The step's output holding parameter ``param`` after the update."""
    return f"new_{param}"


@dataclass(frozen=True)
class TrainingStep:
    """A training-step graph and the roles of its inputs (each in the graph's input order)."""

    graph: Graph
    batch: tuple[str, ...]
    targets: tuple[str, ...]
    params: tuple[str, ...]
    lr: float

    @property
    def updates(self) -> dict[str, str]:
        """Parameter -> the output holding its next value."""
        return {p: updated_name(p) for p in self.params}


def mse_text(output: str, target: str, shape: Sequence[int]) -> str:
    """``out[u] += (o - t) * (o - t) / size`` over every element: the mean squared error, shape (1,)."""
    idx = ", ".join(f"i{k}" for k in range(len(shape)))
    diff = f"({output}[{idx}] - {target}[{idx}])"
    return f"out[u] += {diff} * {diff} / {float(math.prod(shape))!r}"


def training_step(model: Graph, params: Sequence[str], lr: float) -> TrainingStep:
    """The SGD training step of ``model`` (expression ops only) for the inputs ``params``; its
    other inputs are the batch. Raises ``GraphError`` for a parameter that is not an input, a
    learning rate that is not a positive number, or a name the step needs that the model takes."""
    params = tuple(dict.fromkeys(params))
    if not params:
        raise GraphError("a training step needs at least one parameter to learn")
    if bad := [p for p in params if p not in model.inputs]:
        raise GraphError(f"parameter {bad[0]} is not an input of {model.name} (its inputs: "
                         f"{', '.join(model.inputs)})")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise GraphError(f"the learning rate must be a positive number, got {lr!r}")
    batch = tuple(t for t in model.inputs if t not in params)
    targets = tuple(target_name(o) for o in model.outputs)
    news = [updated_name(p) for p in params]
    losses = [LOSS] if len(model.outputs) == 1 else [f"{LOSS}_{o}" for o in model.outputs]
    if taken := sorted(set(model.tensors) & {LOSS, grad_name(LOSS), *targets, *news, *losses}):
        raise GraphError(f"{model.name} already has a tensor {taken[0]}, which the training step names: rename it")

    fwd = _copy(model, GraphBuilder(model.name), model.inputs)
    for o, t in zip(model.outputs, targets):
        fwd.input(t, model.tensors[o].shape)
    for o, t, name in zip(model.outputs, targets, losses):
        add_expr_op(fwd, name, mse_text(o, t, model.tensors[o].shape), (1,))
    if len(losses) > 1:
        add_expr_op(fwd, LOSS, "out[u] = " + " + ".join(f"{x}[u]" for x in losses), (1,))
    full = backward_graph(fwd.build([LOSS]))

    b = GraphBuilder(f"{model.name}_step")
    for t in (*batch, *targets, *params):
        b.input(t, full.tensors[t].shape, full.tensors[t].dims)
    b.const(grad_name(LOSS), (1,), value=np.ones(1, np.float32))  # d loss / d loss
    _copy(full, b, (), _needed(full, [LOSS, *(grad_name(p) for p in params)]))
    for p, new in zip(params, news):
        idx = ", ".join(f"i{k}" for k in range(len(model.tensors[p].shape)))
        add_expr_op(b, new, f"out[{idx}] = {p}[{idx}] - {float(lr)!r} * {grad_name(p)}[{idx}]")
    doc = f"SGD step (lr {lr}) of {model.name}: mean squared error, then new_<param> = param - lr * grad_<param>."
    return TrainingStep(b.build([LOSS, *news], doc=doc), batch, targets, params, float(lr))


def _needed(graph: Graph, outputs: Sequence[str]) -> set[str]:
    """The ops ``outputs`` depend on."""
    need, todo = set(), list(outputs)
    while todo:
        t = todo.pop()
        if t not in need and graph.producer(t) is not None:
            need.add(t)
            todo += graph.producer(t).inputs
    return need


def _copy(graph: Graph, b: GraphBuilder, inputs: Sequence[str], ops: set[str] | None = None) -> GraphBuilder:
    """Add ``inputs`` of ``graph`` and its ops (those in ``ops``, all when None) to ``b``."""
    for t in inputs:
        b.input(t, graph.tensors[t].shape, graph.tensors[t].dims)
    for n in graph.nodes:
        if ops is None or n.name in ops:
            b.op(n.name, n.type, *n.inputs, **n.kwargs)
    return b
