"""Opaque kernels: a Relax op of an imported model that the op library does not model, kept as
TVM's own TIR for it (``LegalizeOps`` on that one call).

The op is a graph node of type ``opaque`` whose ``call`` attribute (an ``OpaqueCall``) holds the
one-call Relax function (one parameter per tensor the node reads, in the node's input order;
scalar constants stay inside) and its legalized PrimFunc (parameters: those inputs, then the
output). Lowering takes that PrimFunc as the op's kernel, never fused with its neighbours; its
tensors stay in their default layout (propagation converts a neighbour's layout back to the
default one on the edge, ``propagate``), and layout primitives on them are refused (``refusal``).
Loop primitives apply to the PrimFunc as to any kernel. FLOPs are unknown for TVM's TIR: the op
counts one per output element (an estimate, so that reports show a non-zero rate).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import tvm
import tvm_ffi
from tvm import relax

from ..base.errors import GraphError, first_line

__all__ = ["OpaqueCall", "legalize", "refusal"]

Shape = tuple[int, ...]

#: what opaque TIR is legalized for: generic LLVM (schedules, not the TIR, depend on the CPU)
_TARGET = "llvm"


class OpaqueCall:
    """A Relax call alone in its function, and TVM's PrimFunc for it. Equal (and hashing) by the
    function's structure, so that a re-imported model gives equal graphs."""

    __slots__ = ("op", "func", "prim", "_vm")

    def __init__(self, op: str, func: relax.Function, prim: tvm.tirx.PrimFunc) -> None:
        self.op, self.func, self.prim, self._vm = op, func, prim, None

    @property
    def call(self) -> relax.Call:
        return self.func.body.blocks[0].bindings[0].value

    @property
    def out_shape(self) -> Shape:
        return tuple(int(d) for d in self.func.ret_ty.shape.values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueCall) and tvm_ffi.structural_equal(self.func, other.func)

    def __hash__(self) -> int:
        return int(tvm_ffi.structural_hash(self.func))

    def __str__(self) -> str:  # the graph page's attribute panel: the call as TVMScript prints it
        return " ".join(str(self.call).split())[:200]

    __repr__ = __str__

    def reference(self, vals: Sequence[np.ndarray]) -> np.ndarray:
        """The op on NumPy inputs: a NumPy/PyTorch equivalent when there is one (``_REFS``), else
        TVM's default build of the one-call function (``tvm.compile`` + ``relax.VirtualMachine``).

        That build is *not* independent of the kernel (the same legalized TIR, unscheduled): it
        checks the schedule and the wiring only. The end-to-end check of an imported model against
        its framework (PyTorch, ONNX Runtime: ``models.frontend.framework``) is the independent one."""
        ref = _REFS.get(self.op)
        if ref is not None:
            args = _evaluated_args(self.call, self.func.params, vals)
            out = ref(self.call.attrs, *args)
            if out is not None:
                return np.asarray(out)
        return self._tvm_reference(vals)

    def _tvm_reference(self, vals: Sequence[np.ndarray]) -> np.ndarray:
        if self._vm is None:  # built once per node: verification runs often
            ex = tvm.compile(tvm.IRModule({"main": self.func}), target=_TARGET)
            self._vm = relax.VirtualMachine(ex, tvm.cpu())
        out = self._vm["main"](*(tvm.runtime.tensor(np.ascontiguousarray(v, "float32")) for v in vals))
        return out.numpy()


def refusal(node: Any) -> str:
    """Why a layout primitive on an opaque op's tensors is refused."""
    return (f"{node.name} is an opaque kernel (TVM's legalized TIR of {node.kwargs['op']}, no op-library "
            "definition): its tensors keep their default layout")


def legalize(call: relax.Call, args: Sequence[Any], params: Sequence[relax.Var]) -> OpaqueCall:
    """``call`` alone in a Relax function, legalized. ``args`` are the call's arguments with each
    tensor the graph computes replaced by its parameter (in ``params``) and each constant by a
    ``relax.Constant``; the PrimFunc's parameters are ``params`` then the output.

    Raises ``GraphError`` when TVM cannot legalize the call into one PrimFunc over exactly those
    parameters (e.g. no legalization, several kernels, or a non-scalar constant it reads)."""
    op = call.op.name.removeprefix("relax.")
    what = f"operator {op} has no counterpart in the op library"
    bb = relax.BlockBuilder()
    try:
        with bb.function("main", list(params)):
            out = bb.emit(relax.Call(call.op, list(args), call.attrs, call.ty_args))
            bb.emit_func_output(out)
        one = bb.get()
        with tvm.target.Target(_TARGET):
            mod = tvm.transform.Sequential([relax.backend.DispatchSortScan(), relax.transform.LegalizeOps()])(one)
    except Exception as e:  # TVM's own errors: one line
        raise GraphError(f"{what}, and TVM could not legalize it alone: {first_line(e)}") from None
    prims = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    tir_calls = _bound_calls(mod["main"])
    if len(prims) != 1 or len(tir_calls) != 1 or tir_calls[0].op.name != "relax.call_tir":
        left = sorted({c.op.name.removeprefix("relax.") for c in tir_calls if c.op.name != "relax.call_tir"})
        why = f"TVM has no legalization for {', '.join(left)}" if left else f"TVM legalizes it into {len(prims)} kernels"
        raise GraphError(f"{what}, and cannot be an opaque kernel: {why}")
    prim = next(iter(prims.values()))
    passed = list(tir_calls[0].args[1].fields)
    if len(passed) != len(params) or any(not a.same_as(p) for a, p in zip(passed, params)):
        why = ("its TIR reads a constant tensor (only float32 constants are supported, as graph constants)"
               if any(isinstance(a, tvm.ir.GenericConst) for a in passed) else
               "its TIR takes one tensor as several arguments")
        raise GraphError(f"{what}, and cannot be an opaque kernel: {why}")
    return OpaqueCall(op, one["main"], prim.without_attr("global_symbol"))


def _bound_calls(func: relax.Function) -> list[relax.Call]:
    return [b.value for blk in func.body.blocks for b in blk.bindings if isinstance(b.value, relax.Call)]


########## References ##########

def _evaluated_args(call: relax.Call, params: Sequence[relax.Var], vals: Sequence[np.ndarray]) -> list[Any]:
    """The call's arguments with parameters bound to ``vals`` (float64) and constants as arrays;
    shapes and immediates as Python numbers; anything else as the Relax expression."""
    env = {p: np.asarray(v, np.float64) for p, v in zip(params, vals)}

    def ev(a: Any) -> Any:
        if isinstance(a, relax.Var):
            return env[a]
        if isinstance(a, tvm.ir.GenericConst):
            return a.value.numpy()
        if isinstance(a, relax.Tuple):
            return tuple(ev(f) for f in a.fields)
        if isinstance(a, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
            return a.value
        if isinstance(a, relax.ShapeExpr):
            return tuple(int(v) for v in a.values)
        return a

    return [ev(a) for a in call.args]


def _axes(attrs: Any, x: np.ndarray, key: str = "axis") -> tuple[int, ...] | None:
    v = getattr(attrs, key)
    return None if v is None else tuple(int(a) % x.ndim for a in v)


def _reduce(fn: Callable) -> Callable:
    return lambda a, x: fn(x, axis=_axes(a, x), keepdims=bool(a.keepdims))


def _cumsum(a: Any, x: np.ndarray) -> np.ndarray | None:
    if a.exclusive or (a.dtype is not None and str(a.dtype) not in ("", "void", "float32")):
        return None  # the TVM reference
    return np.cumsum(x, axis=None if a.axis is None else int(a.axis))  # no axis: flattened, as Relax


def _strided_slice(a: Any, x: np.ndarray, axes, begin, end, strides=None) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for k, ax in enumerate(axes):
        index[int(ax)] = slice(int(begin[k]), int(end[k]), int(strides[k]) if strides else 1)
    return x[tuple(index)]


def _log_softmax(a: Any, x: np.ndarray) -> np.ndarray:
    import torch  # imported lazily: only references need it

    return torch.log_softmax(torch.from_numpy(x), int(a.axis)).numpy()


#: relax op name -> NumPy/PyTorch equivalent ``fn(attrs, *args)`` (None: use TVM's)
_REFS: dict[str, Callable[..., np.ndarray | None]] = {
    **{k: (lambda a, x, f=getattr(np, k): f(x)) for k in ("exp", "log", "sqrt", "sin", "cos", "abs", "negative",
                                                          "floor", "ceil")},
    "power": lambda a, x, y: np.power(x, y),
    "nn.leakyrelu": lambda a, x: np.where(x > 0, x, float(a.alpha) * x),
    "nn.log_softmax": _log_softmax,
    "cumsum": _cumsum,
    "max": _reduce(np.max), "min": _reduce(np.min), "sum": _reduce(np.sum), "mean": _reduce(np.mean),
    "prod": _reduce(np.prod),
    "strided_slice": _strided_slice,
}
