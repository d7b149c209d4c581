"""Lowering a plan to TVM (ALT section 6): one TE PrimFunc per kernel.

Each op's loops are rebuilt over the *stored* shape of the buffer it writes: the stored index
is mapped back to the logical one (``layout.inverse``), the operator's logical definition is
evaluated there, and every input is read at its stored position (``layout.forward``, with the
op's sliding windows so an unfolded input is read tile by tile). Stored elements that are
padding get zero (or, inside a reduction, the reduction is masked). Constants are converted
ahead of time with NumPy, never at run time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
from tvm import te

from ..base.index import all_of, index_scope, simplify
from ..layout.primitives import Layout
from ..layout.propagate import Kernel, Plan, base_layout

__all__ = ["lower_kernel", "lower", "stored_constants"]


def _guard(value: Any, conds: list) -> Any:
    """``value`` where ``conds`` hold, else zero; a reduction keeps its top-level form."""
    if not conds:
        return value
    cond = all_of(conds)
    zero = tvm.tirx.const(0, "float32")
    if isinstance(value, tvm.tirx.Reduce):
        # the guard goes on every term, not on the reduction's predicate: with no term a max
        # pool would give its identity (-3e38) where the padding must hold zero
        cover = value.condition if _true(value.condition) else tvm.tirx.Or(value.condition, tvm.tirx.Not(cond))
        return tvm.tirx.Reduce(value.combiner, [tvm.tirx.if_then_else(cond, src, zero) for src in value.source],
                               value.axis, cover, value.value_index, value.init)
    return tvm.tirx.if_then_else(cond, value, zero)


def _true(cond: Any) -> bool:
    return isinstance(cond, tvm.tirx.IntImm) and bool(cond.value)


class _Reader:
    """An op's input read at logical indices through its stored layout (an ``ops_registry.Reader``)."""

    def __init__(self, plan: Plan, tensor: str, buffer: str, ten: te.Tensor) -> None:
        self.ten, self.tensor, self.book = ten, tensor, plan.book
        att = plan.book.attachment(tensor)
        self.base = base_layout(plan.graph, tensor) if att is not None and buffer == plan.book.storage(tensor) else None
        self.layout = plan.buffers[buffer].layout

    def __call__(self, idx: list, win: Any = None) -> Any:
        if self.base is not None:  # stored in another tensor's slot
            return self.ten[tuple(map(simplify, self.book.forward(self.tensor, self.base, list(idx))))]
        return self.ten[tuple(map(simplify, self.layout.forward(list(idx), win)))]

    def margin(self, dim: int) -> tuple[int, int]:
        """Zeros the stored layout holds around logical ``dim`` (``Layout.zero_margin``)."""
        return (0, 0) if self.base is not None else self.layout.zero_margin(dim)


def _stored_compute(lay, body):
    """The op's loops over the stored shape: back to logical indices, evaluate, mask padding."""
    def fcompute(*stored):
        with index_scope(zip(stored, lay.shape)) as ana:
            logical, conds = lay.inverse(list(stored))
            conds = [c for c in map(simplify, conds) if not (hasattr(c, "dtype") and ana.can_prove(c))]
            return _guard(body([simplify(x) for x in logical]), conds)

    return fcompute


def _name(buffer: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in buffer)


def lower_kernel(plan: Plan, kernel: Kernel) -> tvm.tirx.PrimFunc:
    """See ``_lower``."""
    return _lower(plan, kernel, {})


def stage_layouts(plan: Plan, kernel: Kernel) -> dict[str, Layout]:
    """The layout each stage of the kernel's PrimFunc writes, by block name (``loops.dims``
    names loops after these layouts' dims); empty for an opaque kernel (TVM's TIR)."""
    layouts: dict[str, Layout] = {}
    _lower(plan, kernel, layouts)
    return layouts


def _lower(plan: Plan, kernel: Kernel, layouts: dict[str, Layout]) -> tvm.tirx.PrimFunc:
    """The kernel as a PrimFunc whose parameters are its input then output buffers.

    A conversion fused into the kernel (``kernel.fused``) is a stage right after the op that
    writes its source; when that op is simple and nothing else needs its own layout, the op
    writes the converted layout directly (ALT's fused conversion: no intermediate buffer)."""
    from ..ir.ops import OPS

    g = plan.graph
    if kernel.ops and g.node(kernel.head).kind == "opaque":  # TVM's TIR, over default-layout buffers
        return g.node(kernel.head).kwargs["call"].prim.with_attr("global_symbol", kernel.name)
    tensors: dict[str, te.Tensor] = {
        b: te.placeholder(plan.buffers[b].layout.shape, name=_name(b)) for b in kernel.inputs}

    def body_of(type_: str, ins: list[str], attrs: dict, bufs: list[str], tensor: str):
        readers = [_Reader(plan, t, b, tensors[b]) for t, b in zip(ins, bufs)]
        return OPS[type_].compute(readers, [g.tensors[t].shape for t in ins], attrs, g.tensors[tensor].shape)

    def convert_body(conv):
        return body_of("layout_transform", [conv.tensor], {}, [conv.src], conv.tensor)

    def stage(out_buf: str, body, name: str) -> None:
        lay = layouts[_name(name)] = plan.buffers[out_buf].layout
        tensors[out_buf] = te.compute(lay.shape, _stored_compute(lay, body), name=_name(name))

    if kernel.conversion:
        stage(kernel.conversion.dst, convert_body(kernel.conversion), kernel.name)
    read_inside = {plan.reads[(op, t)] for op in kernel.ops for t in g.node(op).inputs}
    for op in kernel.ops:
        node, out_buf = g.node(op), plan.writes[op]
        body = body_of(node.type, list(node.inputs), node.kwargs, [plan.reads[(op, t)] for t in node.inputs], op)
        mine = [c for c in kernel.fused if c.src == out_buf]
        # a complex op keeps its own layout (ALT: it never computes a data-changing one), the
        # conversion reads it; a simple op nobody else reads in its own layout writes the new one
        direct = bool(mine) and node.kind != "complex" and out_buf not in kernel.outputs and out_buf not in read_inside
        if not direct:
            stage(out_buf, body, plan.buffers[out_buf].tensor)
        for c in mine:
            stage(c.dst, body if direct else convert_body(c), c.dst)
    params = [tensors[b] for b in kernel.inputs] + [tensors[b] for b in kernel.outputs]
    return te.create_prim_func(params).with_attr("global_symbol", kernel.name)


def lower(plan: Plan) -> dict[str, tvm.tirx.PrimFunc]:
    """Every kernel of the plan, in execution order."""
    return {k.name: lower_kernel(plan, k) for k in plan.kernels}


def stored_constants(plan: Plan, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Constant buffers in their stored layouts (converted ahead of time, with store_at slots)."""
    out = {}
    for b in plan.buffers.values():
        if b.source == "const":
            out[b.name] = b.layout.to_stored(values[b.tensor])
    for att in plan.book.attachments:
        if att.host not in out or att.tensor not in values:
            continue
        val = values[att.tensor]
        grid = list(np.indices(val.shape, dtype=np.int64))
        pos = plan.book.forward(att.tensor, base_layout(plan.graph, att.tensor), grid)
        out[att.host][tuple(np.broadcast_to(p, val.shape) for p in pos)] = val
    return out
