"""A training step (``models.training``) run as ONE compiled network: the step graph is built
like any graph (``make_program``, then ``relaxnet.build_network``: a Relax VM module whose
``main`` takes the batch, the targets and the parameters and returns the loss and the updated
parameters), and ``CompiledStep.train`` calls it repeatedly, feeding the updated parameters
back as the next call's arguments without leaving the device arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import tvm

from ..base.errors import BuildError
from ..models.training import LOSS, TrainingStep
from .program import Program, make_program
from .relaxnet import RelaxNetwork, build_network
from .targets import DEFAULT_TARGET

__all__ = ["CompiledStep", "compile_step"]


@dataclass
class CompiledStep:
    """A built training step: ``network`` (``export`` writes it as ``network.so``) and its program."""

    step: TrainingStep
    program: Program
    network: RelaxNetwork

    def __post_init__(self) -> None:
        self._main = self.network.vm()["main"]
        self._order = list(self.network.inputs)
        self._slot = {t: k for k, t in enumerate(self.network.outputs)}

    def run(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One step: every output of the step graph (the loss, ``new_<param>``)."""
        return self.network.run(values)

    def train(self, values: Mapping[str, np.ndarray], steps: int) -> tuple[list[float], dict[str, np.ndarray]]:
        """``steps`` SGD steps from ``values`` (every input of the step) on the same batch: the
        loss of each step (before its update) and the parameters after the last."""
        if steps < 1:
            raise ValueError(f"steps must be at least 1, got {steps}")
        args = dict(zip(self._order, self.network.args(values)))
        losses = []
        for _ in range(steps):
            outs = self._main(*(args[t] for t in self._order))
            losses.append(float(outs[self._slot[LOSS]].numpy()[0]))
            for p, new in self.step.updates.items():
                args[p] = outs[self._slot[new]]
        return losses, {p: args[p].numpy() for p in self.step.params}

    def call(self, args: list[tvm.runtime.Tensor]) -> tvm.runtime.Tensor:
        """``main`` on prepared arguments (``network.args``), for timing: its outputs' tuple."""
        return self._main(*args)


def compile_step(step: TrainingStep, values: Mapping[str, np.ndarray], target: Mapping = DEFAULT_TARGET,
                 program: Program | None = None) -> CompiledStep:
    """Build ``step`` as one network for ``target`` (its constants from ``values``, e.g.
    ``graph.random_inputs``; ``program``: a program of ``step.graph`` with scheduled kernels,
    by default ``make_program``'s). Raises ``BuildError``, also when a parameter's stored layout
    would differ from its update's (then the update could not be fed back as it is)."""
    program = program or make_program(step.graph)
    if program.graph is not step.graph:
        raise BuildError(f"the program is of graph {program.graph.name}, not of the step {step.graph.name}")
    net = build_network(program, values, target)
    for p, new in step.updates.items():
        if net.inputs.get(p) != net.outputs[new]:
            raise BuildError(f"parameter {p} is taken as {net.inputs.get(p)} but its update {new} comes back as "
                             f"{net.outputs[new]}: the step cannot feed it back")
    return CompiledStep(step, program, net)
