"""A Relax module (TVM's import of an ONNX or torch.export model) as the engine's ``Graph``.

Each binding of ``main`` is mapped onto the op library (``relax_ops``); any other op becomes an
opaque kernel, TVM's legalized TIR for that call alone (``ir.opaque``). Chains of calls that
are one op of a decoder layer (RMSNorm, rotary embedding, attention) are found first
(``decoder``) and mapped as that op. Bindings whose inputs are all constants are evaluated with
NumPy (``fold``). Batch norms right after a conv are folded into it by TVM (``prepare``); the
others arrive as per-channel arithmetic that ``peephole`` merges into one scale and one bias, or
into the weight of the op before them. Reshapes are views (``graph_writer``): a reshaped tensor
is not copied until an op needs it in that shape.

Names: an op is named after its type with a counter (``conv3``, ``relu6_2``); the bias add right
after a conv or dense is ``<op>_bias``; constants are ``<op>.weight``, ``<op>.bias``, ... (as in
the zoo).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tvm
from tvm import relax

from ...base.errors import GraphError
from ...ir.graph import Graph
from .decoder import emit, find_fused
from .fold import FOLD, ints
from .graph_writer import GraphWriter, View, check_dtype, is_shape, sanitize, shape_of
from .peephole import simplify
from .relax_ops import OPS, opaque

__all__ = ["prepare", "to_graph"]


def prepare(mod: tvm.IRModule) -> tvm.IRModule:
    """Fold batch norms into the convs before them; the rest becomes arithmetic (model-import.md)."""
    seq = tvm.transform.Sequential([relax.transform.FoldBatchnormToConv2D(),
                                    relax.transform.DecomposeOpsForInference(),
                                    relax.transform.CanonicalizeBindings()])
    return seq(mod)


def to_graph(mod: tvm.IRModule, name: str, doc: str = "") -> Graph:
    """Map ``mod["main"]`` onto the op library, other ops as opaque kernels; refuse (``GraphError``)
    an op with no counterpart that TVM cannot legalize into one kernel, a dtype other than float32,
    or a shape that is not static."""
    return _Converter(name).run(mod["main"], doc)


class _Converter(GraphWriter):
    """Walks ``main``'s bindings and writes each one's value into the graph."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.env: dict[Any, Any] = {}  # Relax var -> its value: a graph tensor, a view or a constant

    def run(self, func: relax.Function, doc: str) -> Graph:
        for p in func.params:
            check_dtype(p.ty, f"input {p.name}")
            self.env[p] = self.b.input(sanitize(p.name), shape_of(p.ty, f"input {p.name}"))
        body = func.body
        fused = find_fused(func)
        needed = _needed(body, fused)
        for block in body.blocks:
            for bind in block.bindings:
                if bind.var in fused and bind.var in needed:
                    self.env[bind.var] = emit(self, fused[bind.var], shape_of(bind.var.ty, fused[bind.var].type))
                elif bind.var in needed:
                    self.env[bind.var] = self.visit(bind.value)
        out = self.visit(body.body)
        outs = list(out) if isinstance(out, tuple) else [out]
        names = []
        for i, o in enumerate(outs):
            if isinstance(o, np.ndarray) or o in self.b.tensors and self.b.tensors[o].role == "input":
                raise GraphError(f"model output {i} is a constant or an input: there is nothing to compute")
            names.append(self.real(o))
        b, names = simplify(self.b, list(dict.fromkeys(names)))
        return b.build(names, doc=doc)

    def visit(self, e: Any) -> Any:
        if isinstance(e, relax.Var):
            return self.env[e]
        if isinstance(e, tvm.ir.GenericConst):
            return e.value.numpy()
        if isinstance(e, (tvm.tirx.FloatImm, tvm.tirx.IntImm)):
            return np.array(e.value, dtype=str(e.ty))
        if isinstance(e, relax.ShapeExpr):
            return ints(e.values)
        if isinstance(e, relax.Tuple):
            return tuple(self.visit(f) for f in e.fields)
        if isinstance(e, relax.TupleGetItem):
            return self.visit(e.tuple_value)[e.index]
        if isinstance(e, relax.Call):
            return self.call(e)
        if isinstance(e, tvm.ir.GlobalVar):  # the kernel of a call_tir: read from the call itself
            return None
        raise GraphError(f"unsupported Relax expression {type(e).__name__}: {str(e)[:80]}")

    def call(self, call: relax.Call) -> Any:
        if not isinstance(call.op, tvm.ir.Op):
            raise GraphError(f"a call to {str(call.op)[:60]} has no counterpart in the op library")
        op = call.op.name.removeprefix("relax.")
        args = [self.visit(a) for a in call.args]
        if not any(isinstance(a, (str, View)) for a in _flat(args)):
            if op not in FOLD:
                raise GraphError(f"operator {op} (on constants) has no counterpart in the op library")
            dtype = str(call.ty.dtype) if isinstance(call.ty, relax.TensorType) else None
            out = np.asarray(FOLD[op](call.attrs, *args))
            return out.astype(dtype) if dtype else out
        if op not in OPS:
            return opaque(self, call, args)
        check_dtype(call.ty, f"output of {op}")
        return OPS[op](self, call, args, shape_of(call.ty, f"output of {op}"))


def _flat(args: Sequence[Any]) -> list[Any]:
    return [x for a in args for x in (_flat(a) if isinstance(a, tuple) and not is_shape(a) else [a])]


def _needed(body: relax.SeqExpr, fused: dict) -> set:
    """The bindings the outputs depend on: the rest (e.g. max-pool indices, the calls inside a
    ``fused`` chain) is not imported."""
    defs = {b.var: b.value for blk in body.blocks for b in blk.bindings}
    seen: set = set()
    stack = [body.body]
    while stack:
        e = stack.pop()
        if isinstance(e, relax.Var):
            if e not in seen and e in defs:
                seen.add(e)
                stack.extend(fused[e].inputs if e in fused else [defs[e]])
        elif isinstance(e, relax.Call):
            stack.extend(e.args)
        elif isinstance(e, relax.Tuple):
            stack.extend(e.fields)
        elif isinstance(e, relax.TupleGetItem):
            stack.append(e.tuple_value)
    return seen
