"""The benchmark behind ``python -m workbench bench --suite training``: one
SGD training step (forward, backward, update) of each training example
(``models.training_examples``), ours against PyTorch eager and ``torch.compile``, timed in turn
(``interleave.remeasure``).

Ours is the step as one compiled network (``build.training``) with every kernel under its
expert schedule, the updated parameters fed back call by call. Before timing, ``STEPS`` steps of
each contender from the same weights are checked against the NumPy reference of the step graph
for the first step and against PyTorch eager for every step (``max_loss_error``); a contender
that fails is reported and not timed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from workbench.engine.base.interleave import ROUNDS, Timer, call_timer, remeasure
from workbench.engine.build.program import make_program
from workbench.engine.build.training import CompiledStep, compile_step
from workbench.engine.models.training_examples import ALL_EXAMPLES, example_step, initial_values, torch_trainer
from workbench.engine.schedules.policy import scheduled_funcs
from .suite import machine_name
from .tables import write_tables

__all__ = ["CONTENDERS", "COLUMNS", "EXAMPLE_NAMES", "STEPS", "TOLERANCE", "ours", "training_timers",
           "run_training_bench"]

EXAMPLE_NAMES = tuple(ALL_EXAMPLES)
CONTENDERS = ("ours", "torch", "torch_compile")
COLUMNS = ("model", "ours_ms", "torch_ms", "torch_compile_ms", "speedup_vs_torch", "speedup_vs_torch_compile",
           "max_loss_error", "verified", "noisy", "rounds")
#: steps each contender runs from the same weights before it is timed
STEPS = 5
#: the largest difference of a step's loss from PyTorch eager's that still verifies
TOLERANCE = 1e-4


def ours(name: str, target: Mapping, values: Mapping[str, np.ndarray]) -> CompiledStep:
    """The example's step as one network, every kernel under its expert schedule."""
    step = example_step(name)
    prog = make_program(step.graph)
    prog = prog.with_funcs(scheduled_funcs(prog, target, expert={k.name for k in prog.plan.kernels}))
    return compile_step(step, {**step.graph.random_inputs(0), **values}, target, prog)


def training_timers(name: str, target: Mapping, seed: int = 0) -> tuple[dict[str, Timer], float]:
    """A timer per contender of one training step of example ``name``, and the largest
    difference of a step's loss from PyTorch eager's over ``STEPS`` steps (every contender)."""
    step = example_step(name)
    values = initial_values(step, seed)
    compiled = ours(name, target, values)
    losses = {"ours": compiled.train(values, STEPS)[0]}
    first = step.graph.reference({**step.graph.random_inputs(0), **values})["loss"][0]
    runs: dict[str, Callable[[], float]] = {}
    for c, flag in (("torch", False), ("torch_compile", True)):
        check, _ = torch_trainer(name, step, values, compiled=flag)
        losses[c] = [check() for _ in range(STEPS)]
        runs[c] = torch_trainer(name, step, values, compiled=flag)[0]
    want = np.array(losses["torch"])
    error = max(float(np.abs(np.array(v) - want).max()) for v in losses.values())
    error = max(error, abs(losses["ours"][0] - float(first)))
    args = compiled.network.args(values)
    slots = {p: (list(compiled.network.inputs).index(p), list(compiled.network.outputs).index(new))
             for p, new in compiled.step.updates.items()}

    def our_step() -> None:  # the update fed back, as in training
        outs = compiled.call(args)
        for i, o in slots.values():
            args[i] = outs[o]

    return {"ours": call_timer(our_step), **{c: call_timer(r) for c, r in runs.items()}}, error


def run_training_bench(names: Sequence[str], out_dir: Path, target: Mapping, rounds: int = ROUNDS,
                       on_step: Callable[[str], None] = lambda msg: None) -> list[dict]:
    """Time each example (``training_timers``), write ``training.md``, ``.csv`` and ``.json`` in
    ``out_dir``; returns the rows."""
    rows = []
    for name in names:
        on_step(f"{name}: build and check")
        timers, error = training_timers(name, target)
        verified = error <= TOLERANCE
        row = {"model": name, "max_loss_error": error, "verified": verified, "rounds": rounds}
        if verified:
            on_step(f"{name}: time")
            got = remeasure(timers, rounds)
            row.update({f"{c}_ms": got[c].median_ms for c in CONTENDERS})
            row["noisy"] = ",".join(c for c in CONTENDERS if got[c].noisy)
            row["speedup_vs_torch"] = row["torch_ms"] / row["ours_ms"]
            row["speedup_vs_torch_compile"] = row["torch_compile_ms"] / row["ours_ms"]
        rows.append(row)
    heading = (f"# Training step (forward + backward + SGD update), ours vs PyTorch\n\n{machine_name()}; "
               f"median ms per step over {rounds} interleaved rounds; ours: one compiled network, expert schedules")
    write_tables(out_dir, "training", COLUMNS, rows, heading)
    (Path(out_dir) / "training.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return rows

