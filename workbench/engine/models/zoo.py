"""The model zoo: small graphs written with ``GraphBuilder``, one per ALT workload type.

Every model documents its ops and tensors; the app and session files use these names.
``MODELS`` maps a zoo name to its builder; ``NETWORKS`` holds the real networks of the paper's
end-to-end study (ResNet-18, MobileNet-V2, a BERT-base layer) and a Llama decoder layer (its
prefill and decode phases), imported from their ``torch.nn`` definitions (``networks``) through
``frontend`` like any user model, one import at a time in a process (``BUILD_LOCK``: torch.export
is not thread-safe). ``load(name, **options)`` builds one after checking the options against the
model's declared schema (``OPTIONS``): type, range, divisibility and a cap on tensor size, so a
bad option is refused with a message naming it before TVM sees a shape.

A session's ``"model"`` field has one schema (``check_model``): ``{"zoo": NAME, **options}``, or a
model file pinned by content, ``{"file": PATH, "sha256": HEX, "inputs": {NAME: [dims]}}`` (with an
optional ``"origin"``, the factory it was exported from); ``load_model`` builds either.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..base.errors import GraphError
from ..ir.graph import Graph, GraphBuilder

__all__ = ["MODELS", "NETWORKS", "OPTIONS", "IntOption", "load", "check_options", "check_model", "load_model",
           "model_label",
           "file_model", "DEFAULT_MODEL", "MAX_TENSOR_ELEMENTS", "BUILD_LOCK"]

DEFAULT_MODEL = "r18_stem"


def _conv(b: GraphBuilder, name: str, x: str, out: int, k: int | tuple, *, stride=1, padding=0, dilation=1,
          groups=1, bias: bool = False, nd: int = 2) -> str:
    """Add a conv (and ``<name>.weight``); with ``bias``, a ``<name>_bias`` op reading ``<name>_bias.bias``."""
    cin = b.tensors[x].shape[1]
    ks = k if isinstance(k, tuple) else (k,) * nd
    w = b.const(f"{name}.weight", (out, cin // groups, *ks), "OI" + "DHW"[3 - nd:])
    depthwise = groups > 1 and groups == cin == out
    attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    if depthwise:
        attrs["depthwise"] = True
    y = b.op(name, f"conv{nd}d", x, w, **attrs)
    if bias:
        y = _bias(b, f"{name}_bias", y)
    return y


def _bias(b: GraphBuilder, name: str, x: str, axis: int = 1) -> str:
    c = b.const(f"{name}.bias", (b.tensors[x].shape[axis],), "C")
    return b.op(name, "bias_add", x, c, axis=axis)


def r18_stem(batch: int = 1) -> Graph:
    """ResNet-18's first layer, the ALT paper's case study (its Table 3). The default model.

    data (N,3,224,224) -> pad (N,3,230,230; 3 each side) -> conv (C2D, 64x3x7x7, stride 2;
    weight ``conv.weight``) -> bias (``bias.bias`` (64,)) -> relu (N,64,112,112).
    """
    b = GraphBuilder("r18_stem")
    x = b.input("data", (batch, 3, 224, 224))
    p = b.op("pad", "pad", x, before=(0, 0, 3, 3), after=(0, 0, 3, 3))
    w = b.const("conv.weight", (64, 3, 7, 7), "OIHW")
    c = b.op("conv", "conv2d", p, w, stride=2)
    y = b.op("bias", "bias_add", c, b.const("bias.bias", (64,), "C"), axis=1)
    b.op("relu", "relu", y)
    return b.build(doc=r18_stem.__doc__)


def r18_block(batch: int = 1) -> Graph:
    """A ResNet-18 basic block, 64 channels at 56x56, with its residual add.

    data (N,64,56,56) -> conv1 (C2D 3x3 pad 1; conv1.weight) -> conv1_bias (conv1_bias.bias) -> relu1
    -> conv2 (C2D 3x3 pad 1; conv2.weight) -> conv2_bias (conv2_bias.bias) -> add (+ data)
    -> relu2 (N,64,56,56).
    """
    b = GraphBuilder("r18_block")
    x = b.input("data", (batch, 64, 56, 56))
    y = b.op("relu1", "relu", _conv(b, "conv1", x, 64, 3, padding=1, bias=True))
    y = _conv(b, "conv2", y, 64, 3, padding=1, bias=True)
    b.op("relu2", "relu", b.op("add", "add", y, x))
    return b.build(doc=r18_block.__doc__)


def mv2_block(batch: int = 1) -> Graph:
    """A MobileNet-V2 inverted residual block (expansion 6, 24 channels at 28x28).

    data (N,24,28,28) -> expand (1x1 C2D to 144; expand.weight) -> expand_bias (expand_bias.bias)
    -> relu6_1 -> dw (DEP 3x3 pad 1, 144 groups; dw.weight (144,1,3,3)) -> dw_bias (dw_bias.bias)
    -> relu6_2 -> project (1x1 C2D to 24; project.weight) -> project_bias (project_bias.bias)
    -> add (+ data) (N,24,28,28).
    """
    b = GraphBuilder("mv2_block")
    x = b.input("data", (batch, 24, 28, 28))
    y = b.op("relu6_1", "relu6", _conv(b, "expand", x, 144, 1, bias=True))
    y = b.op("relu6_2", "relu6", _conv(b, "dw", y, 144, 3, padding=1, groups=144, bias=True))
    y = _conv(b, "project", y, 24, 1, bias=True)
    b.op("add", "add", y, x)
    return b.build(doc=mv2_block.__doc__)


def bert_tiny_layer(batch: int = 1, seq: int = 128, hidden: int = 128, heads: int = 2) -> Graph:
    """One BERT-tiny encoder layer (sequence 128, hidden 128, 2 heads, FFN 512).

    data (S,H) -> q, k, v (GMM with q.weight, k.weight, v.weight (H,H)) -> q_bias, k_bias, v_bias
    (q_bias.bias, k_bias.bias, v_bias.bias)
    -> q_heads_r, k_t_r, v_heads_r (reshape to (S,heads,H/heads)) -> q_heads, v_heads (transpose to
    (heads,S,H/heads)), k_t (transpose to (heads,H/heads,S))
    -> scores (batched GMM (heads,S,S)) -> scale -> softmax -> context (batched GMM)
    -> ctx_t (transpose) -> ctx (reshape (S,H)) -> out (GMM; out.weight) -> out_bias (out_bias.bias)
    -> add1 (+ data) -> ln1 (layer norm; ln1.gamma, ln1.beta) -> ffn1 (GMM to 512; ffn1.weight)
    -> ffn1_bias (ffn1_bias.bias) -> gelu -> ffn2 (GMM to 128; ffn2.weight) -> ffn2_bias (ffn2_bias.bias)
    -> add2 (+ ln1) -> ln2 (layer norm; ln2.gamma, ln2.beta) (S,H).
    """
    b = GraphBuilder("bert_tiny_layer")
    x = b.input("data", (seq, hidden), "SH")
    dh = hidden // heads

    def dense(name: str, inp: str, out: int) -> str:
        w = b.const(f"{name}.weight", (b.tensors[inp].shape[-1], out), "KN")
        return _bias(b, f"{name}_bias", b.op(name, "matmul", inp, w), axis=-1)

    def split_heads(name: str, inp: str, perm: tuple) -> str:
        r = b.op(f"{name}_r", "reshape", inp, shape=(seq, heads, dh))
        return b.op(name, "transpose", r, perm=perm)

    q = split_heads("q_heads", dense("q", x, hidden), (1, 0, 2))
    k = split_heads("k_t", dense("k", x, hidden), (1, 2, 0))
    v = split_heads("v_heads", dense("v", x, hidden), (1, 0, 2))
    s = b.op("scale", "scale", b.op("scores", "matmul", q, k), factor=1.0 / dh ** 0.5)
    p = b.op("softmax", "softmax", s, axis=-1)
    c = b.op("ctx_t", "transpose", b.op("context", "matmul", p, v), perm=(1, 0, 2))
    c = b.op("ctx", "reshape", c, shape=(seq, hidden))
    y = b.op("add1", "add", dense("out", c, hidden), x)

    def norm(name: str, inp: str) -> str:
        return b.op(name, "layer_norm", inp, b.const(f"{name}.gamma", (hidden,), "C"),
                    b.const(f"{name}.beta", (hidden,), "C"))

    h = norm("ln1", y)
    f = dense("ffn2", b.op("gelu", "gelu", dense("ffn1", h, 4 * hidden)), hidden)
    norm("ln2", b.op("add2", "add", f, h))
    return b.build(doc=bert_tiny_layer.__doc__)


def gmm(batch: int = 1, m: int = 1024, n: int = 1024, k: int = 1024) -> Graph:
    """A general matrix multiply, 1024x1024x1024: a (M,K) @ gmm.weight (K,N) -> gmm (M,N)."""
    b = GraphBuilder("gmm")
    a = b.input("a", (m, k), "MK")
    b.op("gmm", "matmul", a, b.const("gmm.weight", (k, n), "KN"))
    return b.build(doc=gmm.__doc__)


def _single(name: str, doc: str, in_shape: tuple, out: int, k, nd: int, **attrs) -> Callable[..., Graph]:
    def build(batch: int = 1) -> Graph:
        b = GraphBuilder(name)
        x = b.input("data", (batch, *in_shape), "NC" + "DHW"[3 - nd:])
        _conv(b, "conv", x, out, k, nd=nd, **attrs)
        return b.build(doc=doc)

    build.__doc__ = doc
    return build


def _tconv(name: str, doc: str, in_shape: tuple, out: int, k: int, nd: int, stride: int, padding: int) -> Callable[..., Graph]:
    def build(batch: int = 1) -> Graph:
        b = GraphBuilder(name)
        x = b.input("data", (batch, *in_shape), "NC" + "DHW"[3 - nd:])
        w = b.const("tconv.weight", (in_shape[0], out, *(k,) * nd), "IO" + "DHW"[3 - nd:])
        b.op("tconv", f"conv_transpose{nd}d", x, w, stride=stride, padding=padding)
        return b.build(doc=doc)

    build.__doc__ = doc
    return build


MODELS: dict[str, Callable[..., Graph]] = {
    "r18_stem": r18_stem,
    "r18_block": r18_block,
    "mv2_block": mv2_block,
    "bert_tiny_layer": bert_tiny_layer,
    "gmm": gmm,
    "c1d": _single("c1d", "C1D (wav2letter-like): data (N,64,256) -> conv (64->128, k=3, pad 1; conv.weight) (N,128,256).",
                   (64, 256), 128, 3, 1, padding=1),
    "c3d": _single("c3d", "C3D (ResNet3D-18 layer): data (N,64,8,28,28) -> conv (64->64, 3x3x3, pad 1; "
                   "conv.weight) (N,64,8,28,28).",
                   (64, 8, 28, 28), 64, 3, 3, padding=1),
    "dil": _single("dil", "DIL (dilated C2D, DeepLab-like): data (N,64,28,28) -> conv (64->64, 3x3, dilation 2, pad 2; "
                   "conv.weight) (N,64,28,28).",
                   (64, 28, 28), 64, 3, 2, padding=2, dilation=2),
    "grp": _single("grp", "GRP (grouped C2D, ResNeXt-like): data (N,128,28,28) -> conv (128->128, 3x3, pad 1, 32 groups; "
                   "conv.weight) (N,128,28,28).",
                   (128, 28, 28), 128, 3, 2, padding=1, groups=32),
    "t2d": _tconv("t2d", "T2D (DCGAN-like transposed conv): data (N,128,16,16) -> tconv (128->64, 4x4, stride 2, pad 1; "
                  "tconv.weight (128,64,4,4)) (N,64,32,32).", (128, 16, 16), 64, 4, 2, 2, 1),
    "t3d": _tconv("t3d", "T3D (3D decoder transposed conv): data (N,32,4,16,16) -> tconv (32->16, 4x4x4, stride 2, pad 1; "
                  "tconv.weight (32,16,4,4,4)) (N,16,8,32,32).", (32, 4, 16, 16), 16, 4, 3, 2, 1),
}


########## Real networks (imported from torch.nn) ##########

#: one model import at a time in this process: torch.export keeps process-wide state (its mode
#: stacks, the module being traced) that two threads importing at once corrupt for each other
BUILD_LOCK = threading.RLock()


def _one_at_a_time(build: Callable[..., Graph]) -> Callable[..., Graph]:
    """``build`` (an ``lru_cache``d import) under ``BUILD_LOCK``: a second caller waits, then
    finds the graph cached. A failed import caches nothing, so calling again retries it."""
    @functools.wraps(build)
    def run(*args: Any, **kwargs: Any) -> Graph:
        with BUILD_LOCK:
            return build(*args, **kwargs)

    run.cache_info, run.cache_clear = build.cache_info, build.cache_clear  # type: ignore[attr-defined]
    return run


@_one_at_a_time
@functools.lru_cache(maxsize=8)  # an import takes seconds: the app replays sessions on every undo
def _imported(name: str, doc: str, **options: int) -> Graph:
    from . import networks
    from .frontend import import_module

    module, example = getattr(networks, name)(**options)
    return import_module(module, example, name, doc)


def resnet18(batch: int = 1) -> Graph:
    """ResNet-18 on 224x224 images (1000 classes), imported from ``networks.ResNet18`` with
    seeded random weights and its batch norms folded into the convs: 20 convs (C2D) with their
    bias adds, 17 relus, 8 residual adds, a max pool and a global average pool, a dense layer.
    Op names follow their type: conv1..conv20, conv1_bias, relu1, add1, maxpool1, avgpool1, dense1."""
    return _imported("resnet18", resnet18.__doc__, batch=batch)


def mobilenet_v2(batch: int = 1) -> Graph:
    """MobileNet-V2 on 224x224 images (1000 classes), imported from ``networks.MobileNetV2``
    with seeded random weights and its batch norms folded: 52 convs (35 C2D, 17 DEP) with their
    bias adds, 35 relu6, 10 residual adds, a global average pool and a dense layer."""
    return _imported("mobilenet_v2", mobilenet_v2.__doc__, batch=batch)


def bert_layer(batch: int = 1, seq: int = 128, hidden: int = 768, heads: int = 12) -> Graph:
    """One BERT-base encoder layer (hidden 768, 12 heads, FFN 3072) on data (N,seq,768),
    imported from ``networks.BertLayer`` with seeded random weights: six dense GMMs (q, k, v,
    attention output, two FFN) with bias adds, two batched GMMs (scores, context), scale,
    softmax, GELU, two residual adds and two layer norms, with the reshapes/transposes of the heads."""
    return _imported("bert_layer", bert_layer.__doc__, batch=batch, seq=seq, hidden=hidden, heads=heads)


def _llama(name: str, doc: str, hidden: int, heads: int, **options: int) -> Graph:
    if (hidden // heads) % 2:
        raise GraphError(f"{name}: rotary embedding needs an even head dim, got hidden {hidden} / {heads} heads")
    return _imported(name, doc, hidden=hidden, heads=heads, **options)


def llama_layer_prefill(batch: int = 1, seq: int = 128, hidden: int = 2048, heads: int = 32, kv_heads: int = 4,
                        mlp: int = 5632) -> Graph:
    """One Llama decoder layer (TinyLlama-1.1B's sizes: hidden 2048, 32 query and 4 key/value
    heads of 64, MLP 5632) on a prompt data (N,seq,hidden), imported from ``networks.LlamaLayer``
    with seeded random weights. rms1 (RMSNorm) -> dense1..3 (q, k, v GMMs) -> reshape/transpose
    into heads -> rotary1 (q), rotary2 (k; cos/sin tables as constants) -> attention1 (GQA,
    causal) -> transpose4, reshape4 -> dense4 -> add1 (residual) -> rms2 -> dense5 (gate), dense6
    (up) -> silu_mul1 -> dense7 (down) -> add2. Outputs: add2 and the K/V cache (rotary2, transpose3)."""
    return _llama("llama_layer_prefill", llama_layer_prefill.__doc__, hidden, heads, batch=batch, seq=seq,
                  kv_heads=kv_heads, mlp=mlp)


def llama_layer_decode(batch: int = 1, past: int = 128, hidden: int = 2048, heads: int = 32, kv_heads: int = 4,
                       mlp: int = 5632) -> Graph:
    """The decode step of ``llama_layer_prefill``'s layer (the same weights): one token data
    (N,1,hidden) at position ``past`` and a K/V cache past_k, past_v (N,kv_heads,past,64). The
    ops of the prefill, GEMMs become matrix-vector products, and concat1, concat2 append the
    token's K/V to the cache. Outputs: add2 and the cache of past + 1 positions (concat1, concat2)."""
    return _llama("llama_layer_decode", llama_layer_decode.__doc__, hidden, heads, batch=batch, past=past,
                  kv_heads=kv_heads, mlp=mlp)


NETWORKS: dict[str, Callable[..., Graph]] = {"resnet18": resnet18, "mobilenet_v2": mobilenet_v2,
                                             "bert_layer": bert_layer, "llama_layer_prefill": llama_layer_prefill,
                                             "llama_layer_decode": llama_layer_decode}


#: the largest tensor a model may have (2**28 fp32 elements = 1 GiB): beyond it, buffers overflow
#: TVM's int32 indexing and this machine's memory
MAX_TENSOR_ELEMENTS = 1 << 28


@dataclass(frozen=True)
class IntOption:
    """An integer model option in ``[lo, hi]``, a multiple of ``multiple_of`` (an int, or the
    name of another option)."""

    lo: int = 1
    hi: int = 1 << 16
    multiple_of: int | str = 1

    def check(self, model: str, name: str, value: Any, options: dict[str, Any]) -> None:
        where = f'model option "{name}" of {model}'
        if not isinstance(value, int) or isinstance(value, bool):
            raise GraphError(f"{where} must be an integer in [{self.lo}, {self.hi}], got {value!r}")
        if not self.lo <= value <= self.hi:
            raise GraphError(f"{where} must be in [{self.lo}, {self.hi}], got {value}")
        div = options.get(self.multiple_of, 1) if isinstance(self.multiple_of, str) else self.multiple_of
        if isinstance(div, int) and div > 0 and value % div:
            by = f"{self.multiple_of} ({div})" if isinstance(self.multiple_of, str) else str(div)
            raise GraphError(f"{where} must be a multiple of {by}, got {value}")


_BATCH = IntOption(1, 256)
#: model -> option -> its schema (every builder parameter is declared)
OPTIONS: dict[str, dict[str, IntOption]] = {name: {"batch": _BATCH} for name in MODELS}
# batch 1 only: the sequence is the row dim
OPTIONS["bert_tiny_layer"] = {"batch": IntOption(1, 1), "seq": IntOption(1, 4096),
                              "hidden": IntOption(1, 4096, "heads"), "heads": IntOption(1, 64)}
OPTIONS["gmm"] = {"batch": IntOption(1, 1), "m": IntOption(1, 65536), "n": IntOption(1, 65536),
                  "k": IntOption(1, 65536)}
OPTIONS.update(resnet18={"batch": IntOption(1, 64)}, mobilenet_v2={"batch": IntOption(1, 64)},
               bert_layer={"batch": IntOption(1, 64), "seq": IntOption(1, 512), "hidden": IntOption(1, 4096, "heads"),
                           "heads": IntOption(1, 64)})
_LLAMA = {"batch": IntOption(1, 8), "hidden": IntOption(2, 8192, "heads"), "heads": IntOption(1, 128, "kv_heads"),
          "kv_heads": IntOption(1, 128), "mlp": IntOption(1, 32768)}
OPTIONS.update(llama_layer_prefill={**_LLAMA, "seq": IntOption(1, 4096)},
               llama_layer_decode={**_LLAMA, "past": IntOption(1, 4096)})


def check_options(name: str, options: dict[str, Any]) -> None:
    """Refuse an unknown model, an unknown option or a value outside its schema, naming it."""
    if name not in MODELS and name not in NETWORKS:
        raise GraphError(f"unknown zoo model {name!r}; known: {', '.join([*MODELS, *NETWORKS])}")
    schema = OPTIONS[name]
    if unknown := sorted(set(options) - set(schema), key=str):
        raise GraphError(f"unknown model option {unknown[0]!r} for {name}; it takes: {', '.join(schema) or 'none'}")
    full = {**_defaults(name), **options}
    for opt, value in options.items():
        schema[opt].check(name, opt, value, full)


def _defaults(name: str) -> dict[str, Any]:
    params = inspect.signature(_builder(name)).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def _builder(name: str) -> Callable[..., Graph]:
    return MODELS.get(name) or NETWORKS[name]


def load(name: str, **options) -> Graph:
    """Build zoo model ``name`` with ``options`` (such as ``batch``), checked first.

    >>> load("gmm", m=64.5)
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.GraphError: model option "m" of gmm must be an integer in [1, 65536], got 64.5
    """
    check_options(name, options)
    return _check_size(_builder(name)(**options), name, "use smaller model options")


def _check_size(graph: Graph, name: str, hint: str) -> Graph:
    big = max(graph.tensors.values(), key=lambda t: math.prod(t.shape))
    if (n := math.prod(big.shape)) > MAX_TENSOR_ELEMENTS:
        raise GraphError(f"tensor {big.name} of {name} would have {n:,} elements ({'x'.join(map(str, big.shape))}), "
                         f"over the limit of {MAX_TENSOR_ELEMENTS:,}; {hint}")
    return graph


########## The "model" field of a session ##########

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FILE_KEYS = {"file", "sha256", "inputs", "origin"}
_MODEL_FORMS = '{"zoo": NAME, ...options} or {"file": PATH, "sha256": HEX, "inputs": {NAME: [dims]}}'


def check_model(model: Any) -> None:
    """Refuse a session "model" field outside its schema, naming the part that is wrong (the
    options of a zoo model are checked against ``OPTIONS``; a file model's file is not read)."""
    if not isinstance(model, Mapping):
        raise GraphError(f"a model is {_MODEL_FORMS}, got {type(model).__name__}")
    if "zoo" in model:
        if not isinstance(model["zoo"], str):
            raise GraphError(f"needs {{\"zoo\": NAME}} with NAME a string, got {model['zoo']!r}")
        check_options(model["zoo"], {k: v for k, v in model.items() if k != "zoo"})
        return
    if "file" not in model:
        raise GraphError(f"needs {_MODEL_FORMS}")
    if unknown := sorted(set(model) - _FILE_KEYS, key=str):
        raise GraphError(f"unknown key {unknown[0]!r} of a file model; it takes: {', '.join(sorted(_FILE_KEYS))}")
    if not isinstance(model["file"], str) or not model["file"]:
        raise GraphError(f'"file" must be a path, got {model["file"]!r}')
    if not isinstance(model.get("sha256"), str) or not _SHA256.match(model["sha256"]):
        raise GraphError(f'"sha256" must be the SHA-256 of the model file (64 hex digits), got {model.get("sha256")!r}')
    inputs = model.get("inputs")
    if not isinstance(inputs, Mapping):
        raise GraphError(f'"inputs" must map each input name to its shape, got {inputs!r}')
    for name, dims in inputs.items():
        ok = all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= MAX_TENSOR_ELEMENTS for d in dims) \
            if isinstance(dims, list) else False
        if not (ok and 1 <= len(dims) <= 8):
            raise GraphError(f'"inputs": the shape of {name!r} must be a list of 1 to 8 positive ints, got {dims!r}')
    if not isinstance(model.get("origin", ""), str):
        raise GraphError(f'"origin" must be a string, got {model["origin"]!r}')


def model_label(model: Mapping, options: bool = False) -> str:
    """A session model in a few words: a zoo model's name (with ``options``, the options it was
    given), or an imported model's file name.

    >>> model_label({"zoo": "gmm", "m": 64}), model_label({"zoo": "gmm", "m": 64}, options=True)
    ('gmm', 'gmm (m=64)')
    >>> model_label({"file": "/models/net.onnx", "sha256": "0" * 64, "inputs": {}})
    'file: net.onnx'
    """
    if "zoo" not in model:
        return f"file: {Path(str(model.get('file', '?'))).name}"
    given = ", ".join(f"{k}={v}" for k, v in model.items() if k != "zoo")
    return f"{model['zoo']} ({given})" if options and given else str(model["zoo"])


def load_model(model: Mapping) -> Graph:
    """The graph of a session's "model" field (``check_model`` first). A file model is read and
    hashed before it is parsed: a file whose content changed is refused."""
    check_model(model)
    if "zoo" in model:
        return load(model["zoo"], **{k: v for k, v in model.items() if k != "zoo"})
    from .frontend import read_model

    path = model["file"]
    try:
        digest = read_model(path)[2]
    except GraphError as e:
        if "does not exist" in str(e):
            raise
        # it read as a model when the session was made
        raise GraphError(f"model file {path} changed since the session was made: {e}") from None
    if digest != model["sha256"]:
        raise GraphError(f"model file {path} changed since the session was made (its sha256 is now {digest[:12]}..., "
                         f"the session has {model['sha256'][:12]}...): re-import it to start a new session")
    inputs = tuple((k, tuple(v)) for k, v in model["inputs"].items())
    return _file_graph(path, digest, inputs)


@_one_at_a_time
@functools.lru_cache(maxsize=8)
def _file_graph(path: str, digest: str, inputs: tuple) -> Graph:
    from .frontend import import_file, read_model

    data, extern, now = read_model(path)
    if now != digest:  # changed between the check and this read
        raise GraphError(f"model file {path} changed while it was being imported")
    return _check_size(import_file(path, dict(inputs), model=(data, extern)), path, "give smaller input shapes")


def file_model(path: str, inputs: Mapping[str, Any] | None = None, origin: str | None = None) -> tuple[dict, Graph]:
    """Import a model file: the session "model" field that pins it (path, sha256, every input's
    shape) and its graph (the one ``load_model`` of that field gives, imported once)."""
    from .frontend import input_shapes, read_model

    data, extern, digest = read_model(path)
    with BUILD_LOCK:  # a .pt2 is loaded by torch.export
        shapes = input_shapes(path, inputs, model=(data, extern))
    spec = {"file": str(path), "sha256": digest, "inputs": {k: list(v) for k, v in shapes.items()}}
    if origin:
        spec["origin"] = origin
    check_model(spec)
    return spec, _file_graph(str(path), digest, tuple(shapes.items()))
