"""The reference of an expression op: a NumPy interpreter of its tree, independent of TVM (float64,
exact ``exp``/``tanh``/``sigmoid``).

Every index is an axis of one broadcast grid (the output's, then the reduction's); the value is
evaluated on the whole grid and reduced over the reduction axes. The output is computed in
blocks along its leading dims so that no grid holds more than about 4M points.

>>> import numpy as np
>>> from workbench.engine.ir.expr.define import define
>>> op = define("out[i, j] += a[i, k] * b[k, j]", {"a": (2, 3), "b": (3, 2)})
>>> a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
>>> evaluate(op, [a, b]).tolist()
[[3.0, 3.0], [12.0, 12.0]]
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

from .define import ExprOp
from .fold import NumPyBackend, fold_value

__all__ = ["evaluate"]

#: grid points per block
_BLOCK = 1 << 22


def evaluate(op: ExprOp, values: Sequence[np.ndarray]) -> np.ndarray:
    """The op's output (float64) on ``values``, one array per input in ``op.inputs`` order."""
    for t, v, want in zip(op.inputs, values, op.in_shapes):
        if tuple(np.shape(v)) != want:
            raise ValueError(f"{t} has shape {tuple(np.shape(v))}, the op reads it as {want}")
    be = NumPyBackend(dict(zip(op.inputs, values)))
    names = [n for n, _ in op.extents]
    extents = [e for _, e in op.extents]
    n_out = len(op.out_shape)
    out = np.empty(op.out_shape, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0), 0/0: the values say so (inf, nan)
        for block in _blocks(extents, n_out):
            env = {}
            for d, (name, rng) in enumerate(zip(names, block)):
                env[name] = np.arange(rng.start, rng.stop).reshape([-1 if j == d else 1 for j in range(len(names))])
            value = np.broadcast_to(fold_value(op.statement.rhs, env, be), [len(r) for r in block])
            red = tuple(range(n_out, len(names)))
            if red:
                value = value.sum(axis=red) if op.statement.reduce == "+=" else value.max(axis=red)
            out[tuple(slice(r.start, r.stop) for r in block[:n_out])] = value
    return out


def _blocks(extents: list[int], n_out: int) -> list[tuple[range, ...]]:
    """The grid cut along its leading output dims into blocks of at most ``_BLOCK`` points (or one
    output element at a time, with every reduction index, when even that is more)."""
    cuts: list[list[range]] = []
    for d in range(n_out):
        n, rest = extents[d], math.prod(extents[d + 1:])
        step = 1 if rest > _BLOCK else min(n, max(1, _BLOCK // rest))
        cuts.append([range(s, min(s + step, n)) for s in range(0, n, step)])
        if rest <= _BLOCK:
            break
    cuts += [[range(n)] for n in extents[len(cuts):]]
    return list(itertools.product(*cuts))
