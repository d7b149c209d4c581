"""The computational graph: tensors and the operators between them, as a networkx DAG.

Naming (the app and session files refer to these names): an op's output tensor has the op's
name; graph inputs are named by the model (``data``...); constants are ``<op>.weight`` and
``<op>.bias`` (and other ``<op>.<role>`` names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Sequence

import networkx as nx
import numpy as np

from ..base.errors import GraphError
from .ops import OPS, OpDef
from . import ops_decoder  # noqa: F401 - registers the decoder family (RMSNorm, rotary, attention) in OPS

__all__ = ["Tensor", "Node", "Graph", "GraphBuilder"]


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    role: str  # "input" | "const" | "op"
    dims: str  # one letter per dim, e.g. "NCHW"
    dtype: str = "float32"

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


@dataclass(frozen=True, slots=True)
class Node:
    """One operator application; its output tensor has the node's name."""

    name: str
    type: str
    inputs: tuple[str, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    @property
    def op(self) -> OpDef:
        return OPS[self.type]

    @property
    def kind(self) -> str:
        return self.op.kind

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.attrs)

    @property
    def label(self) -> str:
        """The paper's operator name (C2D, DEP, GRP, DIL, GMM, ...) or the op type."""
        return self.op.label(self.kwargs)


@dataclass(frozen=True)
class Graph:
    name: str
    tensors: dict[str, Tensor]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    doc: str = ""
    _by_name: dict[str, Node] = field(default_factory=dict, compare=False, repr=False)
    #: constants' own values (an imported model's weights, read-only); others get random ones
    values: Mapping[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({n.name: n for n in self.nodes})

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise GraphError(f"unknown op {name!r} in {self.name}; ops: {', '.join(self._by_name)}") from None

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise GraphError(f"unknown tensor {name!r} in {self.name}; tensors: {', '.join(self.tensors)}") from None

    def producer(self, tensor: str) -> Node | None:
        return self._by_name.get(tensor)

    def consumers(self, tensor: str) -> list[Node]:
        return [n for n in self.nodes if tensor in n.inputs]

    @property
    def inputs(self) -> list[str]:
        return [t.name for t in self.tensors.values() if t.role == "input"]

    @property
    def constants(self) -> list[str]:
        return [t.name for t in self.tensors.values() if t.role == "const"]

    @cached_property
    def dag(self) -> nx.DiGraph:
        """Ops and graph inputs/constants as nodes; an edge per tensor use, labelled with it."""
        g = nx.DiGraph()
        for t in self.tensors.values():
            if t.role != "op":
                g.add_node(t.name, kind=t.role)
        for n in self.nodes:
            g.add_node(n.name, kind=n.kind, type=n.type, label=n.label)
            for i in n.inputs:
                g.add_edge(i, n.name, tensor=i)
        return g

    def flops(self, node: str) -> int:
        n = self.node(node)
        return n.op.flops([self.tensors[i].shape for i in n.inputs], n.kwargs, self.tensors[n.name].shape)

    def random_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Random values (never zeros) for every graph input and constant; a constant with a value
        of its own (``values``: an imported model's weights) keeps it."""
        rng = np.random.default_rng(seed)
        return {t.name: self.values[t.name] if t.name in self.values
                else rng.uniform(-1.0, 1.0, t.shape).astype(t.dtype) for t in self.tensors.values() if t.role != "op"}

    def reference(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every tensor's value computed with the operators' NumPy/PyTorch references."""
        env = dict(values)
        for n in self.nodes:
            env[n.name] = n.op.reference([env[i] for i in n.inputs], n.kwargs).astype(np.float32)
        return env


class GraphBuilder:
    """A small DSL for the model zoo: each call adds an op and returns its output name.

    >>> b = GraphBuilder("tiny")
    >>> x = b.input("data", (1, 3, 8, 8))
    >>> y = b.op("relu", "relu", x)
    >>> b.build().tensors["relu"].shape
    (1, 3, 8, 8)
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        self.values: dict[str, np.ndarray] = {}

    def input(self, name: str, shape: Sequence[int], dims: str | None = None) -> str:
        return self._add(Tensor(name, tuple(shape), "input", dims or _dims(len(shape))))

    def const(self, name: str, shape: Sequence[int], dims: str | None = None, value: np.ndarray | None = None) -> str:
        """A constant; with ``value`` (of that shape), the model's own value instead of a random one."""
        if value is not None:
            if tuple(value.shape) != tuple(shape):
                raise GraphError(f"constant {name}: value of shape {value.shape} for shape {tuple(shape)}")
            value = np.array(value, dtype="float32")  # a private copy, read-only: graphs share it
            value.flags.writeable = False
            self.values[name] = value
        return self._add(Tensor(name, tuple(shape), "const", dims or _dims(len(shape))))

    def op(self, name: str, type: str, *inputs: str, **attrs: Any) -> str:
        if type not in OPS:
            raise GraphError(f"unknown operator type {type!r}")
        for i in inputs:
            if i not in self.tensors:
                raise GraphError(f"op {name}: unknown input {i!r}")
        op = OPS[type]
        attrs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()}
        shapes = [self.tensors[i].shape for i in inputs]
        try:
            shape = op.infer(shapes, attrs)
        except (ValueError, IndexError) as e:
            raise GraphError(f"op {name} ({type}): {e}") from None
        self.nodes.append(Node(name, type, tuple(inputs), tuple(sorted(attrs.items()))))
        return self._add(Tensor(name, tuple(shape), "op", op.dims(self.tensors[inputs[0]].dims, len(shape), attrs)))

    def _add(self, t: Tensor) -> str:
        if t.name in self.tensors:
            raise GraphError(f"duplicate tensor name {t.name!r}")
        self.tensors[t.name] = t
        return t.name

    def build(self, outputs: Sequence[str] | None = None, doc: str = "") -> Graph:
        used = {i for n in self.nodes for i in n.inputs}
        outs = tuple(outputs) if outputs else tuple(n.name for n in self.nodes if n.name not in used)
        return Graph(self.name, dict(self.tensors), tuple(self.nodes), outs, doc, values=dict(self.values))


def _dims(rank: int) -> str:
    return {1: "C", 2: "MN", 3: "BMN", 4: "NCHW", 5: "NCDHW"}.get(rank, "ABCDEFGH"[:rank])
