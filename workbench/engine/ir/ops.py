"""The operator library: for each operator a TE definition written over *logical* indices, its
kind, an exact FLOP count and a NumPy/PyTorch reference (the contract: ``ops_registry``).

Importing this module registers every op of the library in ``OPS``. The families:
``ops_conv`` (convolutions, transposed convolutions), ``ops_matmul``, ``ops_elementwise``
(activations, arithmetic, bias, per-axis scale), ``ops_reduce`` (pooling, softmax, layer norm)
and ``ops_shape`` (pad, reshape, transpose, concat); the opaque op is registered here.
``ops_decoder`` and ``expr.op`` add theirs on top (``graph`` imports both).
"""

from __future__ import annotations

import math

from ..base.errors import GraphError
from . import ops_matmul, ops_reduce, ops_shape  # noqa: F401 - their import registers their ops
from .ops_conv import tconv_executed_macs
from .ops_elementwise import elementwise
from .ops_registry import OPS, OpDef, names_for, per_dim, reduce_axis, reduce_stage, register

__all__ = ["OpDef", "OPS", "elementwise", "names_for", "per_dim", "reduce_axis", "reduce_stage", "register",
           "tconv_executed_macs"]


def _refuse_compute(readers, shapes, a, out):
    raise GraphError(f"{a['op']} is an opaque kernel: it has no TE definition")


# TVM's legalized TIR for an imported op the library does not model: its ``call`` attribute (an
# ``opaque.OpaqueCall``) gives the shape and the reference; lowering takes its PrimFunc as the kernel.
register(OpDef("opaque", "opaque", infer=lambda shapes, a: a["call"].out_shape, compute=_refuse_compute,
                flops=lambda shapes, a, out: math.prod(out), reference=lambda vals, a: a["call"].reference(vals),
                labeler=lambda a: a["op"]))
