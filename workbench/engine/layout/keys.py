"""Layout keys of a graph, and layout steps applied by key (presets, which expand into several
steps, are in ``presets``).

A layout key is a tensor name, or ``"T@op"``: the layout complex op ``op`` wants for its input
``T`` (see ``propagate``). An opaque op's output (``opaque``) is no key: its TIR writes the
default layout only. Every function returns a new ``LayoutBook``; a refused primitive
raises ``LayoutError`` and the book is unchanged.
"""

from __future__ import annotations

from typing import Any, Sequence

from .book import LayoutBook
from ..base.errors import LayoutError
from ..ir.graph import Graph
from .primitives import Layout
from ..ir.opaque import refusal
from .propagate import base_layout
from ..base.step import Step

__all__ = ["layout_keys", "key_base", "current", "apply_layout", "apply_actions", "access_text"]


def layout_keys(graph: Graph) -> list[str]:
    """Every key a layout can be applied to: tensors, then complex ops' input views."""
    keys = [t for t in graph.tensors if not _opaque_output(graph, t)]
    for n in graph.nodes:
        if n.kind == "complex":
            keys += [f"{t}@{n.name}" for t in n.inputs if graph.tensors[t].role != "const"]
    return keys


def key_base(graph: Graph, key: str) -> Layout:
    """The identity layout of the tensor a key names (checking that the key exists)."""
    tensor, _, op = key.partition("@")
    graph.tensor(tensor)
    if op:
        node = graph.node(op)
        if node.kind == "opaque":
            raise LayoutError(f"{key}: {refusal(node)}")
        if node.kind != "complex" or tensor not in node.inputs:
            raise LayoutError(f"{key}: {op} is not a complex op reading {tensor}")
    return base_layout(graph, tensor)


def current(graph: Graph, book: LayoutBook, key: str) -> Layout:
    return book.get(key) or key_base(graph, key)


def apply_layout(graph: Graph, book: LayoutBook, key: str, primitive: str, args: dict[str, Any]) -> LayoutBook:
    """Apply one primitive to the tensor (or input view) ``key``; refused on an opaque op's output
    (TVM's TIR for it writes the default layout only)."""
    base = key_base(graph, key)
    if _opaque_output(graph, key):
        raise LayoutError(refusal(graph.node(key)))
    host = None
    if primitive == "store_at":
        into = args.get("into")
        if into not in graph.tensors:
            raise LayoutError(f"store_at into unknown tensor {into!r}")
        if graph.tensors[key].role != "const" or graph.tensors[into].role != "const":
            raise LayoutError(f"store_at works on constants (converted ahead of time): {key} and {into} "
                              f"are {graph.tensors[key].role} and {graph.tensors[into].role}")
        host = base_layout(graph, into)
    return book.apply(key, base, primitive, dict(args), host_base=host)


def apply_actions(graph: Graph, book: LayoutBook, steps: Sequence[Step]) -> LayoutBook:
    """Apply several layout steps, all or nothing."""
    for s in steps:
        book = apply_layout(graph, book, s.target, s.primitive, s.kwargs)
    return book


def _opaque_output(graph: Graph, key: str) -> bool:
    prod = graph.producer(key)
    return prod is not None and prod.kind == "opaque"


def access_text(lay: Layout) -> str:
    """How an access to the logical element is rewritten under ``lay``, e.g.
    ``[n, c, h, w] → [n, c // 16, h, w, c % 16]`` (shown before a primitive is applied)."""
    import tvm

    names = [n.lower() for n in lay.names]
    names = [n if names.count(n) == 1 else f"{n}{i}" for i, n in enumerate(names)]
    idx = lay.forward([tvm.tirx.Var(n, "int32") for n in names])
    return f"[{', '.join(names)}] → [{', '.join(str(i) for i in idx)}]"
