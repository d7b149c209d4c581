"""The graph a Relax import writes, as the per-call mappings see it (``GraphWriter``): ops named
after their type with a counter, constants named after their op, and *views*.

A reshape is a view: the reshaped tensor is not copied until an op needs it in that shape
(``GraphWriter.real``). Element-wise ops, per-axis bias/scale, layer norm over the last dim and
matmuls whose operands differ only by leading unit dims run on the tensor the view reshapes, so
torch's flatten-to-2D-around-every-Linear costs no copy kernel.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import tvm
from tvm import relax

from ...base.errors import GraphError
from ...ir.graph import GraphBuilder
from .fold import ints

Shape = tuple[int, ...]


@dataclass(frozen=True)
class View:
    """Tensor ``src`` of the graph, seen by the model in ``shape`` (not materialized yet)."""

    src: str
    shape: Shape


def shape_of(ty: Any, what: str) -> Shape:
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise GraphError(f"{what} is not a tensor of known shape")
    dims = list(ty.shape.values)
    if not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        raise GraphError(f"{what} has a dynamic shape {list(map(str, dims))}: give its static shape")
    return ints(dims)


def check_dtype(ty: Any, what: str) -> None:
    if isinstance(ty, relax.TensorType) and str(ty.dtype) != "float32":
        raise GraphError(f"unsupported dtype {ty.dtype} ({what}): the workbench computes in float32")


def sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s if s and s[0].isalpha() else f"in_{s}"


def is_shape(a: tuple) -> bool:
    return all(isinstance(x, int) for x in a)


class GraphWriter:
    """The ``GraphBuilder`` of one import, with its ops' counters and the views it made real."""

    def __init__(self, name: str) -> None:
        self.b = GraphBuilder(name)
        self.counts: Counter = Counter()
        self.reshaped: dict[tuple[str, Shape], str] = {}  # materialized views, made once

    def shape(self, v: Any) -> Shape:
        if isinstance(v, View):
            return v.shape
        return tuple(v.shape) if isinstance(v, np.ndarray) else self.b.tensors[v].shape

    def source(self, v: str | View) -> str:
        return v.src if isinstance(v, View) else v

    def wrap(self, tensor: str, shape: Shape) -> str | View:
        return tensor if self.b.tensors[tensor].shape == shape else View(tensor, shape)

    def real(self, v: Any) -> str:
        """The value as a graph tensor of its own shape (a view becomes a reshape op, once)."""
        if isinstance(v, np.ndarray):
            raise GraphError(f"a constant of shape {v.shape} where the op library needs a computed tensor")
        if not isinstance(v, View):
            return v
        key = (v.src, v.shape)
        if key not in self.reshaped:
            self.reshaped[key] = self.op("reshape", "reshape", v.src, shape=v.shape)
        return self.reshaped[key]

    def name(self, base: str) -> str:
        while True:  # skipping names the model gave its inputs
            self.counts[base] += 1
            sep = "_" if base[-1].isdigit() else ""  # relu6_2, not relu62
            if (name := f"{base}{sep}{self.counts[base]}") not in self.b.tensors:
                return name

    def op(self, base: str, type: str, *inputs: str, consts: Sequence[tuple[str, np.ndarray, str | None]] = (),
           **attrs: Any) -> str:
        """Add op ``type`` named ``base`` + a counter reading ``inputs``, then its constants
        ``(role, value, dims)`` named ``<op>.<role>``."""
        name = self.name(base)
        cs = [self.b.const(f"{name}.{role}", v.shape, dims, value=v) for role, v, dims in consts]
        return self.b.op(name, type, *inputs, *cs, **attrs)
