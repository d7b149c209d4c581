"""Peephole rewrites of an imported graph, over chains whose middle tensor has one reader:

- clamps merge: ``relu``, ``relu6`` and ``clip`` are all ``clip(lo, hi)``; two in a row are one
  (ONNX's Clip arrives as a max then a min);
- per-axis affine ops merge: ``scale``, ``scale_axis`` and ``bias_add`` are ``x * s + b`` along
  one axis; a chain is one scale and one bias (a batch norm that TVM did not fold, e.g. after a
  conv with a bias of its own, arrives as four of them);
- an affine right after a conv, transposed conv or dense on its output channels moves its scale
  into the weight, leaving a bias add named ``<op>_bias``;
- two transposes in a row are one (attention's K, split into heads, then transposed).

The result is rebuilt with ``GraphBuilder`` (shapes re-inferred, so a rewrite cannot change one).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir.graph import GraphBuilder, Tensor

__all__ = ["simplify", "BIG"]

BIG = 3.4028234663852886e38  # float32's largest: an open bound of a clamp

#: weighted op -> (axis of its output's channels, axis of the weight that holds them)
_WEIGHTED = {**{f"conv{d}d": (1, 0) for d in (1, 2, 3)}, **{f"conv_transpose{d}d": (1, 1) for d in (1, 2, 3)},
             "matmul": (-1, -1)}


@dataclass
class _Rec:
    """An op being rewritten; ``clip`` and ``affine`` are the normalized clamp and affine kinds."""

    name: str
    type: str
    inputs: list[str]
    attrs: dict[str, Any]
    lo: float = 0.0
    hi: float = BIG
    axis: int | None = None  # affine: the axis of scale/shift (None: scalar only)
    scale: Any = None  # affine: a float or a vector, None for 1
    shift: np.ndarray | None = None  # affine: a vector along ``axis``, None for 0
    consts: list[str] = field(default_factory=list)


def _normalize(node: Any, tensors: dict[str, Tensor], values: dict[str, np.ndarray]) -> _Rec:
    r = _Rec(node.name, node.type, list(node.inputs), dict(node.attrs))
    rank = len(tensors[node.name].shape)
    if node.type in ("relu", "relu6", "clip"):
        r.type, r.lo, r.hi = "clip", r.attrs.get("lo", 0.0), r.attrs.get("hi", 6.0 if node.type == "relu6" else BIG)
    elif node.type in ("bias_add", "scale_axis") and node.inputs[1] in values:
        vec = values[node.inputs[1]].astype(np.float64)
        r.type, r.axis, r.inputs = "affine", r.attrs.get("axis", 1) % rank, r.inputs[:1]
        r.scale, r.shift = (None, vec) if node.type == "bias_add" else (vec, None)
    elif node.type == "scale":
        r.type, r.scale = "affine", float(r.attrs["factor"])
    return r


def _merge_affine(first: _Rec, then: _Rec) -> bool:
    """``then`` becomes ``then(first(x))``: (x*s1 + b1)*s2 + b2 = x*(s1*s2) + (b1*s2 + b2)."""
    if first.axis is not None and then.axis is not None and first.axis != then.axis:
        return False
    s1, b1, s2, b2 = first.scale, first.shift, then.scale, then.shift
    then.axis = then.axis if then.axis is not None else first.axis
    then.scale = s1 if s2 is None else s2 if s1 is None else np.multiply(s1, s2)
    shift = None if b1 is None else b1 if s2 is None else b1 * s2
    then.shift = shift if b2 is None else b2 if shift is None else shift + b2
    then.inputs = first.inputs
    return True


def _fold_into(w: _Rec, aff: _Rec, tensors: dict[str, Tensor], values: dict[str, np.ndarray]) -> bool:
    """Move ``aff``'s scale into weighted op ``w``'s constant weight (``aff`` reads ``w``)."""
    out_axis, w_axis = _WEIGHTED[w.type]
    rank = len(tensors[w.name].shape)
    weight = w.inputs[1] if len(w.inputs) > 1 else None
    if weight not in values or aff.scale is None or (aff.axis is not None and aff.axis != out_axis % rank):
        return False
    arr = values[weight].astype(np.float64)
    s = np.asarray(aff.scale, np.float64)
    shape = [1] * arr.ndim
    shape[w_axis % arr.ndim] = -1
    values[weight] = (arr * (s.reshape(shape) if s.ndim else s)).astype(np.float32)
    if aff.shift is not None and aff.axis is None:  # a scalar scale: the shift was per-axis already
        aff.axis = out_axis % rank
    aff.scale = None
    return True


def simplify(b: GraphBuilder, outputs: list[str]) -> tuple[GraphBuilder, list[str]]:
    """The graph with the rewrites above applied, and its outputs' (possibly new) names."""
    uses = Counter(i for n in b.nodes for i in n.inputs)
    uses.update(outputs)
    values = dict(b.values)
    recs: dict[str, _Rec] = {}
    alias: dict[str, str] = {}
    gone: set[str] = set()
    for node in b.nodes:
        r = _normalize(node, b.tensors, values)
        r.inputs = [alias.get(i, i) for i in r.inputs]
        prev = recs.get(r.inputs[0]) if uses[node.inputs[0]] == 1 else None
        if prev is not None and r.type == prev.type == "clip":
            r.lo, r.hi, r.inputs = max(r.lo, prev.lo), min(r.hi, prev.hi), prev.inputs
            gone.add(recs.pop(prev.name).name)
        elif prev is not None and r.type == prev.type == "affine" and _merge_affine(prev, r):
            gone.add(recs.pop(prev.name).name)
        elif prev is not None and r.type == prev.type == "transpose":
            r.attrs["perm"], r.inputs = tuple(prev.attrs["perm"][k] for k in r.attrs["perm"]), prev.inputs
            gone.add(recs.pop(prev.name).name)
        w = recs.get(r.inputs[0])
        if r.type == "affine" and w is not None and w.type in _WEIGHTED and uses[w.name] == 1:
            _fold_into(w, r, b.tensors, values)
            if r.scale is None and (name := f"{w.name}_bias") != r.name and (name in gone or name not in b.tensors):
                r.name = name
        alias[node.name] = r.name
        recs[r.name] = r
    return _rebuild(b, list(recs.values()), values), [alias.get(o, o) for o in outputs]


def _rebuild(b: GraphBuilder, recs: list[_Rec], values: dict[str, np.ndarray]) -> GraphBuilder:
    nb = GraphBuilder(b.name)
    for t in b.tensors.values():
        if t.role == "input":
            nb.input(t.name, t.shape, t.dims)

    def const(name: str, value: np.ndarray, dims: str | None = None) -> str:
        if name not in nb.tensors:
            t = b.tensors.get(name)
            nb.const(name, value.shape, dims or (t.dims if t else "C"), value=value)
        return name

    for r in recs:
        if r.type == "clip":
            kind = {(0.0, BIG): "relu", (0.0, 6.0): "relu6"}.get((r.lo, r.hi), "clip")
            nb.op(r.name, kind, *r.inputs, **({"lo": r.lo, "hi": r.hi} if kind == "clip" else {}))
        elif r.type == "affine":
            _emit_affine(nb, r, const)
        else:
            ins = [const(i, values[i]) if i in b.tensors and b.tensors[i].role == "const" else i for i in r.inputs]
            nb.op(r.name, r.type, *ins, **r.attrs)
    return nb


def _emit_affine(nb: GraphBuilder, r: _Rec, const) -> None:
    x = r.inputs[0]
    rank = len(nb.tensors[x].shape)
    scale = None if r.scale is None or np.all(np.asarray(r.scale) == 1.0) else r.scale
    shift = None if r.shift is None or not np.any(r.shift) else r.shift
    if scale is None and shift is None:  # the identity: still an op, so the name stays a tensor
        scale = 1.0
    if scale is not None:
        name = r.name if shift is None else f"{r.name}_scale"
        if np.ndim(scale) == 0:
            x = nb.op(name, "scale", x, factor=float(scale))
        else:
            x = nb.op(name, "scale_axis", x, const(f"{name}.scale", np.asarray(scale, np.float32)), axis=r.axis)
    if shift is not None:
        axis = r.axis if r.axis is not None else rank - 1
        nb.op(r.name, "bias_add", x, const(f"{r.name}.bias", np.asarray(shift, np.float32)), axis=axis)
