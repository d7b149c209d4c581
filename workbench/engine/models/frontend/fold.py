"""Relax calls evaluated with NumPy (``FOLD``): the importer folds bindings whose inputs are all
constants with it instead of TVM's ``FoldConstant``, which compiles one kernel per expression
(10 s of ResNet-18's import), and ``decoder`` runs the data movement between two tensors on
probe data to see what it does. Each entry is ``fn(attrs, *args)`` on NumPy values (shapes as
tuples of ints)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["FOLD", "ints"]


def ints(values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


FOLD: dict[str, Callable[..., np.ndarray]] = {
    "add": lambda a, x, y: np.add(x, y),
    "subtract": lambda a, x, y: np.subtract(x, y),
    "multiply": lambda a, x, y: np.multiply(x, y),
    "divide": lambda a, x, y: np.divide(x, y),
    "power": lambda a, x, y: np.power(x, y),
    "maximum": lambda a, x, y: np.maximum(x, y),
    "minimum": lambda a, x, y: np.minimum(x, y),
    "sqrt": lambda a, x: np.sqrt(x),
    "rsqrt": lambda a, x: 1.0 / np.sqrt(x),
    "exp": lambda a, x: np.exp(x),
    "negative": lambda a, x: np.negative(x),
    "astype": lambda a, x: x,  # the result is cast to the call's dtype
    "reshape": lambda a, x, shape: np.reshape(x, shape),
    "broadcast_to": lambda a, x, shape: np.broadcast_to(x, shape),
    "permute_dims": lambda a, x: np.transpose(x, None if a.axes is None else ints(a.axes)),
    "expand_dims": lambda a, x: np.expand_dims(x, tuple(int(i) for i in a.axis)),
    "squeeze": lambda a, x: np.squeeze(x, None if a.axis is None else tuple(int(i) for i in a.axis)),
    "flatten": lambda a, x: np.reshape(x, -1),
    "concat": lambda a, xs: np.concatenate(xs, axis=int(a.axis)),
    "isnan": lambda a, x: np.isnan(x),
    "where": lambda a, c, x, y: np.where(c, x, y),
}
