"""A Relax module (TVM's import of an ONNX or torch.export model) as the engine's ``Graph``.

Each binding of ``main`` is mapped onto the op library (``_MAP``); any other op becomes an
opaque kernel, TVM's legalized TIR for that call alone (``_opaque``, ``engine.opaque``). Chains
of calls that are one op of a decoder layer (RMSNorm, rotary embedding, attention) are found
first (``decoder``) and mapped as that op. Bindings whose inputs are all constants are evaluated
with NumPy (``fold``). Batch norms right after a conv
are folded into it by TVM (``prepare``); the others arrive as per-channel arithmetic that
``peephole`` merges into one scale and one bias, or into the weight of the op before them.

Reshapes are *views*: a reshaped tensor is not copied until an op needs it in that shape.
Element-wise ops, per-axis bias/scale, layer norm over the last dim and matmuls whose operands
differ only by leading unit dims run on the tensor the view reshapes, so torch's
flatten-to-2D-around-every-Linear costs no copy kernel.

Names: an op is named after its type with a counter (``conv3``, ``relu7``, ``relu6_2``,
``dense2``); the bias add right after a conv or dense is ``<op>_bias`` (``peephole``); constants
are ``<op>.weight``, ``<op>.bias``, ``<op>.scale``, ``<op>.gamma``, ``<op>.beta`` (as in the zoo).
Afterwards ``peephole.simplify`` merges clamp and affine chains and folds scales into weights.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import tvm
from tvm import relax

from ...base.errors import GraphError
from ...ir.graph import Graph, GraphBuilder
from ...ir.opaque import legalize
from .decoder import emit, find_fused
from .fold import FOLD, ints
from .peephole import BIG, simplify

__all__ = ["prepare", "to_graph"]

Shape = tuple[int, ...]


@dataclass(frozen=True)
class _View:
    """Tensor ``src`` of the graph, seen by the model in ``shape`` (not materialized yet)."""

    src: str
    shape: Shape


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


def _shape_of(ty: Any, what: str) -> Shape:
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise GraphError(f"{what} is not a tensor of known shape")
    dims = list(ty.shape.values)
    if not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        raise GraphError(f"{what} has a dynamic shape {list(map(str, dims))}: give its static shape")
    return ints(dims)


def _check_dtype(ty: Any, what: str) -> None:
    if isinstance(ty, relax.TensorType) and str(ty.dtype) != "float32":
        raise GraphError(f"unsupported dtype {ty.dtype} ({what}): the workbench computes in float32")


def _one(values: Sequence[int]) -> int | tuple[int, ...]:
    """An int when every spatial dim has the same value (as the zoo writes attributes)."""
    values = tuple(values)
    return values[0] if len(set(values)) == 1 else values


def _sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s if s and s[0].isalpha() else f"in_{s}"


class _Converter:
    def __init__(self, name: str) -> None:
        self.b = GraphBuilder(name)
        self.env: dict[Any, Any] = {}
        self.counts: Counter = Counter()
        self.reshaped: dict[tuple[str, Shape], str] = {}  # materialized views, made once

    ########## Driver ##########

    def run(self, func: relax.Function, doc: str) -> Graph:
        for p in func.params:
            _check_dtype(p.ty, f"input {p.name}")
            self.env[p] = self.b.input(_sanitize(p.name), _shape_of(p.ty, f"input {p.name}"))
        body = func.body
        fused = find_fused(func)
        needed = _needed(body, fused)
        for block in body.blocks:
            for bind in block.bindings:
                if bind.var in fused and bind.var in needed:
                    self.env[bind.var] = emit(self, fused[bind.var], _shape_of(bind.var.ty, fused[bind.var].type))
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
        if not any(isinstance(a, (str, _View)) for a in _flat(args)):
            if op not in FOLD:
                raise GraphError(f"operator {op} (on constants) has no counterpart in the op library")
            dtype = str(call.ty.dtype) if isinstance(call.ty, relax.TensorType) else None
            out = np.asarray(FOLD[op](call.attrs, *args))
            return out.astype(dtype) if dtype else out
        if op not in _MAP:
            return _opaque(self, call, args)
        _check_dtype(call.ty, f"output of {op}")
        return _MAP[op](self, call, args, _shape_of(call.ty, f"output of {op}"))

    ########## Tensors, views, constants ##########

    def shape(self, v: Any) -> Shape:
        if isinstance(v, _View):
            return v.shape
        return tuple(v.shape) if isinstance(v, np.ndarray) else self.b.tensors[v].shape

    def source(self, v: str | _View) -> str:
        return v.src if isinstance(v, _View) else v

    def wrap(self, tensor: str, shape: Shape) -> str | _View:
        return tensor if self.b.tensors[tensor].shape == shape else _View(tensor, shape)

    def real(self, v: Any) -> str:
        """The value as a graph tensor of its own shape (a view becomes a reshape op, once)."""
        if isinstance(v, np.ndarray):
            raise GraphError(f"a constant of shape {v.shape} where the op library needs a computed tensor")
        if not isinstance(v, _View):
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


def _flat(args: Sequence[Any]) -> list[Any]:
    return [x for a in args for x in (_flat(a) if isinstance(a, tuple) and not _is_shape(a) else [a])]


def _is_shape(a: tuple) -> bool:
    return all(isinstance(x, int) for x in a)


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


########## Mapping Relax calls onto the op library ##########

def _spatial(call: relax.Call, what: str, nd: int, kernel: str) -> None:
    """Refuse layouts other than NC(D)(H)W data and ``kernel``(D)(H)W weights."""
    a = call.attrs
    want = ("NC" + "DHW"[3 - nd:], kernel + "DHW"[3 - nd:])
    got = (str(a.data_layout), str(a.kernel_layout))
    if got != want or str(a.out_layout) != want[0]:
        raise GraphError(f"{what} in layout {got[0]}/{got[1]} is not supported (only {want[0]}/{want[1]})")


def _conv(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str:
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


def _tconv(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str:
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


def _unit_lead(cv: _Converter, v: Any) -> str | None:
    """The tensor under ``v`` when they differ only by leading unit dims (else None)."""
    if isinstance(v, np.ndarray):
        return None
    src = cv.source(v)
    s, t = cv.shape(v), cv.b.tensors[src].shape
    strip = (lambda sh: sh[next((i for i, n in enumerate(sh[:-2]) if n != 1), max(len(sh) - 2, 0)):])
    return src if len(s) >= 2 and len(t) >= 2 and strip(s) == strip(t) else None


def _with_source_lead(cv: _Converter, v: Any) -> Any:
    """A view given its source's leading unit dims ((1,128,12,64) seen as (128,768) becomes
    (1,128,768)): materialized so, its results line up with the source's other users."""
    if not isinstance(v, _View):
        return v
    extra = _leading_ones(cv.b.tensors[v.src].shape) - _leading_ones(v.shape)
    return _View(v.src, (1,) * extra + v.shape) if extra > 0 else v


def _leading_ones(shape: Shape) -> int:
    return next((i for i, n in enumerate(shape) if n != 1), len(shape))


def _matmul(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
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


def _with_const(cv: _Converter, kind: str, x: Any, c: np.ndarray, out: Shape) -> str | _View:
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
    def convert(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
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
    def convert(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
        return cv.wrap(cv.op(type, type, cv.source(args[0]), **attrs), out)

    return convert


def _clip(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
    x, lo, hi = args
    lo, hi = float(lo), float(hi)
    return cv.wrap(cv.op("clip", "clip", cv.source(x), lo=max(lo, -BIG), hi=min(hi, BIG)), out)


def _view(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
    x = args[0]
    if math.prod(cv.shape(x)) != math.prod(out):
        raise GraphError(f"{call.op.name.removeprefix('relax.')} from {cv.shape(x)} to {out} is not supported")
    return cv.wrap(cv.source(x), out)


def _transpose(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str:
    x = cv.real(args[0])
    axes = call.attrs.axes
    perm = tuple(range(len(out)))[::-1] if axes is None else tuple(int(a) % len(out) for a in axes)
    return cv.op("transpose", "transpose", x, perm=perm)


def _softmax(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str:
    return cv.op("softmax", "softmax", cv.real(args[0]), axis=int(call.attrs.axis) % len(out))


def _layer_norm(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
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


def _pool(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str:
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


def _global_avg(cv: _Converter, x: Any, out: Shape, grid: Sequence[int] = (1, 1)) -> str | _View:
    x = cv.real(x)
    n, c, h, w = cv.shape(x)
    if h % grid[0] or w % grid[1]:
        raise GraphError(f"adaptive average pooling of {h}x{w} to {grid[0]}x{grid[1]} (uneven windows) "
                         "is not supported")
    k = (h // grid[0], w // grid[1])
    return cv.wrap(cv.op("avgpool", "pool2d", x, kernel=_one(k), stride=_one(k), padding=0, mode="avg"), out)


def _mean(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
    rank = len(cv.shape(args[0]))
    axes = sorted(int(i) % rank for i in call.attrs.axis) if call.attrs.axis is not None else list(range(rank))
    if rank != 4 or axes != [2, 3]:
        raise GraphError(f"mean over axes {axes} of a rank-{rank} tensor is not supported (only global pooling)")
    return _global_avg(cv, args[0], out)


def _adaptive_avg(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
    if str(call.attrs.layout) != "NCHW":
        raise GraphError(f"adaptive_avg_pool2d in layout {call.attrs.layout} is not supported")
    return _global_avg(cv, args[0], out, out[2:])


def _concat(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str:
    parts = args[0]
    if any(isinstance(p, np.ndarray) for p in parts):
        raise GraphError("concat with a constant part is not supported")
    return cv.op("concat", "concat", *(cv.real(p) for p in parts), axis=int(call.attrs.axis) % len(out))


def _pad(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str:
    a = call.attrs
    width = ints(a.pad_width)
    if str(a.pad_mode) != "constant":
        raise GraphError(f"pad in mode {a.pad_mode} is not supported (only constant)")
    value = float(args[1]) if len(args) > 1 else float(getattr(a, "pad_value", 0.0))
    return cv.op("pad", "pad", cv.real(args[0]), before=width[0::2], after=width[1::2], value=value)


def _call_tir(cv: _Converter, call: relax.Call, args: list, out: Shape) -> str | _View:
    """A TOPI kernel TVM's importer emitted: only the clamps of ONNX's Clip (max/min by a scalar)."""
    func = re.sub(r"\d+$", "", call.args[0].name_hint)
    parts = args[1]
    scalar = [p for p in parts if isinstance(p, np.ndarray) and p.size == 1]
    tensor = [p for p in parts if isinstance(p, (str, _View))]
    if func not in ("maximum", "minimum") or len(scalar) != 1 or len(tensor) != 1:
        raise GraphError(f"operator {func} (a TOPI kernel) has no counterpart in the op library")
    c = float(scalar[0].reshape(-1)[0])
    lo, hi = (max(c, -BIG), BIG) if func == "maximum" else (-BIG, min(c, BIG))
    return cv.wrap(cv.op("clip", "clip", cv.source(tensor[0]), lo=lo, hi=hi), out)


def _opaque(cv: _Converter, call: relax.Call, args: list) -> str:
    """Any other op: an opaque kernel, TVM's legalized TIR for the call (``engine.opaque``). Each
    computed tensor it reads is a parameter; a float32 constant tensor a graph constant
    ``<op>.arg<i>`` (its parameter too); scalars, shapes and other constants stay in the call."""
    op = call.op.name.removeprefix("relax.")
    try:
        _check_dtype(call.ty, f"output of {op}")
        _shape_of(call.ty, f"output of {op}")
    except GraphError as e:
        raise GraphError(f"operator {op} has no counterpart in the op library, and cannot be an opaque kernel: "
                         f"{e}") from None
    name = cv.name(re.sub(r"^\w+\.", "", op))
    inputs: list[str] = []
    params: dict[str, relax.Var] = {}

    def param(tensor: str) -> relax.Var:
        if tensor not in params:
            inputs.append(tensor)
            params[tensor] = relax.Var(_sanitize(tensor), relax.TensorType(cv.shape(tensor), "float32"))
        return params[tensor]

    def arg(expr: Any, value: Any) -> Any:
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([arg(e, v) for e, v in zip(expr.fields, value)])
        if expr is not None and not isinstance(expr, (relax.Var, tvm.ir.GenericConst)):
            return expr  # shapes, prim values, strings: as the call has them
        if isinstance(value, (str, _View)):
            return param(cv.real(value))
        if isinstance(value, np.ndarray):
            if value.ndim == 0 or value.dtype != np.float32:
                return relax.const(value)
            return param(cv.b.const(f"{name}.arg{len(inputs)}", value.shape, value=value))
        if isinstance(value, tuple) and not _is_shape(value):
            return relax.Tuple([arg(None, v) for v in value])
        raise GraphError(f"operator {op} takes an argument {str(expr)[:60]} the workbench cannot pass on")

    new_args = [arg(e, v) for e, v in zip(call.args, args)]
    return cv.b.op(name, "opaque", *inputs, op=op, call=legalize(call, new_args, [params[t] for t in inputs]))


_MAP: dict[str, Callable[[_Converter, relax.Call, list, Shape], Any]] = {
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
