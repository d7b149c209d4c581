"""Relax calls mapped onto the op library (``OPS``, by Relax op name), any other call as an opaque
kernel (``opaque``). Each mapping takes the ``GraphWriter``, the call, its arguments' values (graph
tensors, views or NumPy constants) and the output's static shape."""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

import numpy as np
import tvm
from tvm import relax

from ...base.errors import GraphError
from ...ir.opaque import legalize
from .fold import ints
from .graph_writer import GraphWriter, Shape, View, check_dtype, is_shape, sanitize, shape_of
from .peephole import BIG

__all__ = ["OPS", "opaque"]


def _one(values: Sequence[int]) -> int | tuple[int, ...]:
    """An int when every spatial dim has the same value (as the zoo writes attributes)."""
    values = tuple(values)
    return values[0] if len(set(values)) == 1 else values


def _spatial(call: relax.Call, what: str, nd: int, kernel: str) -> None:
    """Refuse layouts other than NC(D)(H)W data and ``kernel``(D)(H)W weights."""
    a = call.attrs
    want = ("NC" + "DHW"[3 - nd:], kernel + "DHW"[3 - nd:])
    got = (str(a.data_layout), str(a.kernel_layout))
    if got != want or str(a.out_layout) != want[0]:
        raise GraphError(f"{what} in layout {got[0]}/{got[1]} is not supported (only {want[0]}/{want[1]})")


def _conv(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str:
    x, w = args
    op = call.op.name.removeprefix("relax.nn.")
    nd = int(op[4])
    if not isinstance(w, np.ndarray):
        raise GraphError(f"{op} with a computed weight is not supported (weights must be constants)")
    _spatial(call, op, nd, "OI")
    a = call.attrs
    before, after = ints(a.padding[:nd]), ints(a.padding[nd:])
    x = cv.real(x)
    if before != after:  # asymmetric padding: zeros in a pad op, then the conv pads nothing
        x = cv.op("pad", "pad", x, before=(0, 0, *before), after=(0, 0, *after))
        before = (0,) * nd
    attrs = dict(stride=_one(a.strides), padding=_one(before), dilation=_one(a.dilation), groups=int(a.groups))
    cin = cv.shape(x)[1]
    if attrs["groups"] > 1 and attrs["groups"] == cin == w.shape[0]:
        attrs["depthwise"] = True
    return cv.op("conv", f"conv{nd}d", x, consts=[("weight", w, "OI" + "DHW"[3 - nd:])], **attrs)


def _tconv(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str:
    x, w = args
    op = call.op.name.removeprefix("relax.nn.")
    nd = int(op[4])
    a = call.attrs
    if not isinstance(w, np.ndarray):
        raise GraphError(f"{op} with a computed weight is not supported (weights must be constants)")
    _spatial(call, op, nd, "IO")
    if int(a.groups) != 1 or set(ints(a.dilation)) != {1}:
        raise GraphError(f"{op} with groups {int(a.groups)} or dilation {list(ints(a.dilation))} is not supported")
    before, after = ints(a.padding[:nd]), ints(a.padding[nd:])
    if before != after:
        raise GraphError(f"{op} with asymmetric padding {list(ints(a.padding))} is not supported")
    return cv.op("tconv", f"conv_transpose{nd}d", cv.real(x), consts=[("weight", w, "IO" + "DHW"[3 - nd:])],
                 stride=_one(a.strides), padding=_one(before), output_padding=_one(a.output_padding))


def _unit_lead(cv: GraphWriter, v: Any) -> str | None:
    """The tensor under ``v`` when they differ only by leading unit dims (else None)."""
    if isinstance(v, np.ndarray):
        return None
    src = cv.source(v)
    s, t = cv.shape(v), cv.b.tensors[src].shape
    strip = (lambda sh: sh[next((i for i, n in enumerate(sh[:-2]) if n != 1), max(len(sh) - 2, 0)):])
    return src if len(s) >= 2 and len(t) >= 2 and strip(s) == strip(t) else None


def _with_source_lead(cv: GraphWriter, v: Any) -> Any:
    """A view given its source's leading unit dims ((1,128,12,64) seen as (128,768) becomes
    (1,128,768)): materialized so, its results line up with the source's other users."""
    if not isinstance(v, View):
        return v
    extra = _leading_ones(cv.b.tensors[v.src].shape) - _leading_ones(v.shape)
    return View(v.src, (1,) * extra + v.shape) if extra > 0 else v


def _leading_ones(shape: Shape) -> int:
    return next((i for i, n in enumerate(shape) if n != 1), len(shape))


def _matmul(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
    x, w = args
    if isinstance(x, np.ndarray):
        raise GraphError("matmul of a constant by a computed tensor is not supported (only x @ weight)")
    if len(cv.shape(x)) < 2 or len(cv.shape(w)) < 2:
        raise GraphError(f"matmul of shapes {cv.shape(x)} and {cv.shape(w)} (a vector) is not supported")
    if isinstance(w, np.ndarray):  # x @ weight: the weight gets x's leading dims (unit dims cost nothing)
        xs = _unit_lead(cv, x)
        if xs is None or w.ndim > len(cv.b.tensors[xs].shape):
            xs = cv.real(_with_source_lead(cv, x))
        lead = cv.b.tensors[xs].shape[:-2]
        if w.ndim > len(lead) + 2 or np.broadcast_shapes(w.shape[:-2], lead) != lead:
            raise GraphError(f"matmul of shapes {cv.shape(x)} and {w.shape} (broadcasting x) is not supported")
        w = np.ascontiguousarray(np.broadcast_to(w, (*lead, *w.shape[-2:])))
        dims = "B" * len(lead) + "KN" if len(lead) <= 1 else None
        return cv.wrap(cv.op("dense", "matmul", xs, consts=[("weight", w, dims)]), out)
    xs, ws = _unit_lead(cv, x), _unit_lead(cv, w)
    if xs is None or ws is None or cv.b.tensors[xs].shape[:-2] != cv.b.tensors[ws].shape[:-2]:
        xs, ws = cv.real(x), cv.real(w)
        if cv.shape(x)[:-2] != cv.shape(w)[:-2]:
            raise GraphError(f"matmul of shapes {cv.shape(x)} and {cv.shape(w)} (broadcasting) is not supported")
    return cv.wrap(cv.op("matmul", "matmul", xs, ws), out)


def _source_axis(view: Shape, src: Shape, axis: int) -> int | None:
    """The axis of ``src`` that is ``view``'s ``axis`` under the reshape (same extent, same
    number of elements after it), if any."""
    after = math.prod(view[axis + 1:])
    for b, n in enumerate(src):
        if n == view[axis] and math.prod(src[b + 1:]) == after:
            return b
    return None


def _with_const(cv: GraphWriter, kind: str, x: Any, c: np.ndarray, out: Shape) -> str | View:
    """``x + c`` or ``x * c`` for a constant ``c`` that broadcasts to ``x``'s shape."""
    shape = cv.shape(x)
    if np.broadcast_shapes(c.shape, shape) != shape:
        raise GraphError(f"{kind} of a constant of shape {c.shape} grows the tensor {shape}: not supported")
    c = c.reshape((1,) * (len(shape) - c.ndim) + c.shape).astype("float32")
    big = [d for d, n in enumerate(c.shape) if n != 1]
    role = "bias" if kind == "add" else "scale"
    src = cv.source(x)
    src_shape = cv.b.tensors[src].shape
    if not big:  # a scalar
        if kind == "multiply":
            return cv.wrap(cv.op("scale", "scale", src, factor=float(c.reshape(-1)[0])), out)
        vec, axis, x = np.full(src_shape[-1], c.reshape(-1)[0], "float32"), len(src_shape) - 1, src
    elif len(big) == 1:
        axis = _source_axis(shape, src_shape, big[0])
        if axis is None:
            x, axis = cv.real(x), big[0]
        else:
            x = src
        vec = c.reshape(-1)
    else:  # the constant in full
        y = cv.op(kind, kind, cv.real(x), consts=[(role, np.ascontiguousarray(np.broadcast_to(c, shape)), None)])
        return cv.wrap(y, out)
    y = cv.op("bias" if kind == "add" else "scale", "bias_add" if kind == "add" else "scale_axis", x,
              consts=[(role, vec, "C")], axis=axis)
    return cv.wrap(y, out)


def _binary(kind: str) -> Callable:
    def convert(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
        x, y = args
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            c, t = (x, y) if isinstance(x, np.ndarray) else (y, x)
            if kind in ("subtract", "divide"):
                if c is x:
                    raise GraphError(f"{kind} of a computed tensor from a constant is not supported")
                c = -c if kind == "subtract" else 1.0 / c
            return _with_const(cv, "add" if kind in ("add", "subtract") else "multiply", t, c, out)
        if kind not in ("add", "multiply"):
            raise GraphError(f"{kind} of two computed tensors has no counterpart in the op library")
        if cv.shape(x) != cv.shape(y):
            raise GraphError(f"{kind} of shapes {cv.shape(x)} and {cv.shape(y)} (broadcasting) is not supported")
        sx, sy = cv.source(x), cv.source(y)
        if cv.b.tensors[sx].shape != cv.b.tensors[sy].shape:
            sx, sy = cv.real(x), cv.real(y)
        return cv.wrap(cv.op(kind, kind, sx, sy), out)

    return convert


def _unary(type: str, **attrs: Any) -> Callable:
    def convert(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
        return cv.wrap(cv.op(type, type, cv.source(args[0]), **attrs), out)

    return convert


def _clip(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
    x, lo, hi = args
    lo, hi = float(lo), float(hi)
    return cv.wrap(cv.op("clip", "clip", cv.source(x), lo=max(lo, -BIG), hi=min(hi, BIG)), out)


def _view(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
    x = args[0]
    if math.prod(cv.shape(x)) != math.prod(out):
        raise GraphError(f"{call.op.name.removeprefix('relax.')} from {cv.shape(x)} to {out} is not supported")
    return cv.wrap(cv.source(x), out)


def _transpose(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str:
    x = cv.real(args[0])
    axes = call.attrs.axes
    perm = tuple(range(len(out)))[::-1] if axes is None else tuple(int(a) % len(out) for a in axes)
    return cv.op("transpose", "transpose", x, perm=perm)


def _softmax(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str:
    return cv.op("softmax", "softmax", cv.real(args[0]), axis=int(call.attrs.axis) % len(out))


def _layer_norm(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
    x, g, b = args
    a = call.attrs
    if [int(i) % len(out) for i in a.axes] != [len(out) - 1] or not (a.center and a.scale):
        raise GraphError(f"layer_norm over axes {list(ints(a.axes))} is not supported (only the last)")
    if not (isinstance(g, np.ndarray) and isinstance(b, np.ndarray)):
        raise GraphError("layer_norm with computed gamma/beta is not supported")
    src = cv.source(x)
    if cv.b.tensors[src].shape[-1] != out[-1]:
        src = cv.real(x)
    y = cv.op("ln", "layer_norm", src, consts=[("gamma", g.astype("float32"), "C"), ("beta", b.astype("float32"), "C")],
              eps=float(a.epsilon))
    return cv.wrap(y, out)


def _pool(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str:
    op = call.op.name.removeprefix("relax.nn.")
    a = call.attrs
    if str(a.layout) != "NCHW" or set(ints(a.dilation)) != {1}:
        raise GraphError(f"{op} in layout {a.layout} or with dilation {list(ints(a.dilation))} is not supported")
    before, after = ints(a.padding[:2]), ints(a.padding[2:])
    if before != after:
        raise GraphError(f"{op} with asymmetric padding {list(ints(a.padding))} is not supported")
    mode = "max" if op.startswith("max") else "avg"
    if mode == "avg" and any(before) and not a.count_include_pad:
        raise GraphError(f"{op} with padding that does not count the padded zeros is not supported")
    x = cv.real(args[0])
    y = cv.op(f"{mode}pool", "pool2d", x, kernel=_one(a.pool_size), stride=_one(a.strides), padding=_one(before),
              mode=mode)
    if cv.shape(y) != out:  # ceil_mode giving an extra window
        raise GraphError(f"{op} with ceil_mode gives {out}; only floor mode ({cv.shape(y)}) is supported")
    return y


def _global_avg(cv: GraphWriter, x: Any, out: Shape, grid: Sequence[int] = (1, 1)) -> str | View:
    x = cv.real(x)
    n, c, h, w = cv.shape(x)
    if h % grid[0] or w % grid[1]:
        raise GraphError(f"adaptive average pooling of {h}x{w} to {grid[0]}x{grid[1]} (uneven windows) "
                         "is not supported")
    k = (h // grid[0], w // grid[1])
    return cv.wrap(cv.op("avgpool", "pool2d", x, kernel=_one(k), stride=_one(k), padding=0, mode="avg"), out)


def _mean(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
    rank = len(cv.shape(args[0]))
    axes = sorted(int(i) % rank for i in call.attrs.axis) if call.attrs.axis is not None else list(range(rank))
    if rank != 4 or axes != [2, 3]:
        raise GraphError(f"mean over axes {axes} of a rank-{rank} tensor is not supported (only global pooling)")
    return _global_avg(cv, args[0], out)


def _adaptive_avg(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
    if str(call.attrs.layout) != "NCHW":
        raise GraphError(f"adaptive_avg_pool2d in layout {call.attrs.layout} is not supported")
    return _global_avg(cv, args[0], out, out[2:])


def _concat(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str:
    parts = args[0]
    if any(isinstance(p, np.ndarray) for p in parts):
        raise GraphError("concat with a constant part is not supported")
    return cv.op("concat", "concat", *(cv.real(p) for p in parts), axis=int(call.attrs.axis) % len(out))


def _pad(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str:
    a = call.attrs
    width = ints(a.pad_width)
    if str(a.pad_mode) != "constant":
        raise GraphError(f"pad in mode {a.pad_mode} is not supported (only constant)")
    value = float(args[1]) if len(args) > 1 else float(getattr(a, "pad_value", 0.0))
    return cv.op("pad", "pad", cv.real(args[0]), before=width[0::2], after=width[1::2], value=value)


def _call_tir(cv: GraphWriter, call: relax.Call, args: list, out: Shape) -> str | View:
    """A TOPI kernel TVM's importer emitted: only the clamps of ONNX's Clip (max/min by a scalar)."""
    func = re.sub(r"\d+$", "", call.args[0].name_hint)
    parts = args[1]
    scalar = [p for p in parts if isinstance(p, np.ndarray) and p.size == 1]
    tensor = [p for p in parts if isinstance(p, (str, View))]
    if func not in ("maximum", "minimum") or len(scalar) != 1 or len(tensor) != 1:
        raise GraphError(f"operator {func} (a TOPI kernel) has no counterpart in the op library")
    c = float(scalar[0].reshape(-1)[0])
    lo, hi = (max(c, -BIG), BIG) if func == "maximum" else (-BIG, min(c, BIG))
    return cv.wrap(cv.op("clip", "clip", cv.source(tensor[0]), lo=lo, hi=hi), out)


def opaque(cv: GraphWriter, call: relax.Call, args: list) -> str:
    """Any other op: an opaque kernel, TVM's legalized TIR for the call (``ir.opaque``). Each
    computed tensor it reads is a parameter; a float32 constant tensor a graph constant
    ``<op>.arg<i>`` (its parameter too); scalars, shapes and other constants stay in the call."""
    op = call.op.name.removeprefix("relax.")
    try:
        check_dtype(call.ty, f"output of {op}")
        shape_of(call.ty, f"output of {op}")
    except GraphError as e:
        raise GraphError(f"operator {op} has no counterpart in the op library, and cannot be an opaque kernel: "
                         f"{e}") from None
    name = cv.name(re.sub(r"^\w+\.", "", op))
    inputs: list[str] = []
    params: dict[str, relax.Var] = {}

    def param(tensor: str) -> relax.Var:
        if tensor not in params:
            inputs.append(tensor)
            params[tensor] = relax.Var(sanitize(tensor), relax.TensorType(cv.shape(tensor), "float32"))
        return params[tensor]

    def arg(expr: Any, value: Any) -> Any:
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([arg(e, v) for e, v in zip(expr.fields, value)])
        if expr is not None and not isinstance(expr, (relax.Var, tvm.ir.GenericConst)):
            return expr  # shapes, prim values, strings: as the call has them
        if isinstance(value, (str, View)):
            return param(cv.real(value))
        if isinstance(value, np.ndarray):
            if value.ndim == 0 or value.dtype != np.float32:
                return relax.const(value)
            return param(cv.b.const(f"{name}.arg{len(inputs)}", value.shape, value=value))
        if isinstance(value, tuple) and not is_shape(value):
            return relax.Tuple([arg(None, v) for v in value])
        raise GraphError(f"operator {op} takes an argument {str(expr)[:60]} the workbench cannot pass on")

    new_args = [arg(e, v) for e, v in zip(call.args, args)]
    return cv.b.op(name, "opaque", *inputs, op=op, call=legalize(call, new_args, [params[t] for t in inputs]))


#: Relax op name (without "relax.") -> the mapping of its calls
OPS: dict[str, Callable[[GraphWriter, relax.Call, list, Shape], Any]] = {
    **{f"nn.conv{nd}d": _conv for nd in (1, 2, 3)},
    **{f"nn.conv{nd}d_transpose": _tconv for nd in (1, 2, 3)},
    "matmul": _matmul,
    **{k: _binary(k) for k in ("add", "multiply", "subtract", "divide")},
    "nn.relu": _unary("relu"), "nn.gelu": _unary("gelu"), "sigmoid": _unary("sigmoid"), "tanh": _unary("tanh"),
    "clip": _clip, "nn.silu": _unary("silu"), "erf": _unary("erf"), "call_tir": _call_tir,
    **{k: _view for k in ("reshape", "flatten", "squeeze", "expand_dims", "broadcast_to", "astype")},
    "permute_dims": _transpose, "nn.softmax": _softmax, "nn.layer_norm": _layer_norm,
    "nn.max_pool2d": _pool, "nn.avg_pool2d": _pool, "nn.adaptive_avg_pool2d": _adaptive_avg, "mean": _mean,
    "concat": _concat, "nn.pad": _pad,
}
