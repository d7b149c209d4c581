"""Layout presets: named primitive sequences that users (and the joint tuner) apply in one step:
NHWC, channel blocking, ALT's tiled convolution template, GMM's NKn and its weight panels alone
for matrix-vector products (``packed_gemv``).

A preset is data: what it builds, what it applies to (a tensor, or a complex op of some types:
``Preset.applies_to``), and its default parameters. Its builder returns layout ``Step``s,
applied all or nothing.

>>> from workbench.engine.models import zoo
>>> g = zoo.load("r18_stem")
>>> PRESETS["alt_tiled"].targets(g)
['conv']
>>> [str(s) for s in preset_actions(g, "blocked", "conv", factor=16)]
['split(dim=1, factors=[-1, 16])', 'reorder(perm=[0, 1, 3, 4, 2])']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..base.errors import LayoutError
from ..ir.graph import Graph
from .keys import key_base, layout_keys
from ..ir.ops import per_dim
from ..base.step import Step

__all__ = ["Preset", "PRESETS", "preset_actions", "channels_last", "blocked", "alt_tiled", "nkn",
           "packed_gemv"]


def _step(key: str, primitive: str, args: dict[str, Any]) -> Step:
    return Step.make("layout", key, primitive, **args)


def _to_last(rank: int, dim: int) -> list[int]:
    return [d for d in range(rank) if d != dim] + [dim]


def channels_last(graph: Graph, tensor: str) -> list[Step]:
    """NCHW -> NHWC (any rank: the channel dim 1 moves last)."""
    rank = len(key_base(graph, tensor).shape)
    return [_step(tensor, "reorder", {"perm": _to_last(rank, 1)})]


def blocked(graph: Graph, tensor: str, factor: int = 16, dim: int = 1) -> list[Step]:
    """N(C/c)HW(c): split dim ``dim`` by ``factor`` and move the inner part last."""
    rank = len(key_base(graph, tensor).shape)
    return [_step(tensor, "split", {"dim": dim, "factors": [-1, factor]}),
            _step(tensor, "reorder", {"perm": _to_last(rank + 1, dim + 1)})]


def _tile_perm(nd: int) -> list[int]:
    """N C.o C.i S1.o S1.i ... -> N S1.o .. C.o S1.i .. C.i"""
    return [0] + [3 + 2 * j for j in range(nd)] + [1] + [4 + 2 * j for j in range(nd)] + [2]


def alt_tiled(graph: Graph, op: str, tiles: list[int] | int = 4, ot: int = 16, it: int = 16,
              wot: int | None = None, wit: int | None = None, tile_out: bool = True) -> list[Step]:
    """ALT's one-level conv template (paper section 5): output N(H/ht)(W/wt)(O/ot) ht wt ot,
    input N(H/ht)(W/wt)(I/it)(ht+KH-1)(wt+KW-1) it through unfold (overlapped tiles, so each
    output tile reads one contiguous input tile), weight (O/ot)(I/it) KH KW it ot (a transposed
    conv's weight, stored (I, O, KH, KW), takes the same form: its output channels innermost).
    ``tile_out=False`` leaves the output's layout as it is: the conv writes it from its register
    tile, with no conversion after it (ALT's output conversion fused into the kernel), where the
    tiled output would be converted back for a consumer or the graph's output."""
    node = graph.node(op)
    if not node.type.startswith("conv"):
        raise LayoutError(f"alt_tiled applies to convolutions; {op} is {node.label}")
    if not isinstance(tile_out, bool):
        raise LayoutError(f"alt_tiled's tile_out must be true or false, got {tile_out!r}")
    x, w = node.inputs[:2]
    out_shape = graph.tensors[op].shape
    nd = len(out_shape) - 2
    tl = [tiles] * nd if isinstance(tiles, int) else list(tiles)
    if len(tl) != nd:
        raise LayoutError(f"alt_tiled on {op} needs {nd} tile sizes, got {tl}")
    a = node.kwargs
    s, p, d = per_dim(a, "stride", nd, 1), per_dim(a, "padding", nd, 0), per_dim(a, "dilation", nd, 1)
    ks = graph.tensors[w].shape[2:]
    cin = graph.tensors[x].shape[1]
    # A tile larger than the output is clipped to it, for the output split AND the input unfold
    # (unclipped, the unfold's stride tl*s outgrew its tile and the preset was refused).
    tl = [min(t, n) for t, n in zip(tl, out_shape[2:])]
    acts: list[Step] = []
    if tile_out:
        for j in reversed(range(nd)):
            acts.append(_step(op, "split", {"dim": 2 + j, "factors": [-1, tl[j]]}))
        acts += [_step(op, "split", {"dim": 1, "factors": [-1, min(ot, out_shape[1])]}),
                 _step(op, "reorder", {"perm": _tile_perm(nd)})]
    view = f"{x}@{op}"
    if node.type.startswith("conv_transpose"):
        acts += blocked(graph, view, min(it, cin))
    else:
        for j in reversed(range(nd)):
            if p[j]:
                acts.append(_step(view, "pad", {"dim": 2 + j, "before": p[j], "after": p[j]}))
        for j in reversed(range(nd)):
            span = (ks[j] - 1) * d[j] + 1
            extent = graph.tensors[x].shape[2 + j] + 2 * p[j]
            # A stride larger than the kernel span (e.g. a 1x1 conv with stride 2) leaves gaps
            # between the input windows; the tile then covers a whole stride (unfold never skips
            # elements). One tile clipped to the whole dim needs no stride beyond it.
            tile = min(max((tl[j] - 1) * s[j] + span, tl[j] * s[j]), extent)
            acts.append(_step(view, "unfold", {"dim": 2 + j, "tile": tile, "stride": min(tl[j] * s[j], tile)}))
        acts += [_step(view, "split", {"dim": 1, "factors": [-1, min(it, cin)]}),
                 _step(view, "reorder", {"perm": _tile_perm(nd)})]
    wshape = graph.tensors[w].shape
    o_dim = 1 if node.type.startswith("conv_transpose") else 0  # a transposed conv's weight is (I, O, *K)
    i_dim = 1 - o_dim
    block = {o_dim: min(wot or ot, wshape[o_dim]), i_dim: min(wit or it, wshape[i_dim])}
    # dim 1 split first, so dim 0 keeps its index: (D0/b0, b0, D1/b1, b1, *K), which the perm
    # makes (O/wo, I/wi, *K, wi, wo)
    acts += [_step(w, "split", {"dim": 1, "factors": [-1, block[1]]}),
             _step(w, "split", {"dim": 0, "factors": [-1, block[0]]})]
    kernel = list(range(4, len(wshape) + 2))
    perm = [0, 2] + kernel + [3, 1] if o_dim == 0 else [2, 0] + kernel + [1, 3]
    return acts + [_step(w, "reorder", {"perm": perm})]


def nkn(graph: Graph, op: str, m: int = 16, n: int = 16) -> list[Step]:
    """GMM's NKn tiling (paper section 5): C (M/m)(N/n) m n, A (M/m) K m, B (N/n) K n."""
    node = graph.node(op)
    if node.type != "matmul":
        raise LayoutError(f"nkn applies to matmul; {op} is {node.label}")
    a, b = node.inputs[:2]
    lead = len(graph.tensors[op].shape) - 2
    c_m, c_n = lead, lead + 1
    keep = list(range(lead))
    av = a if graph.tensors[a].role == "const" else f"{a}@{op}"
    bv = b if graph.tensors[b].role == "const" else f"{b}@{op}"
    acts = [_step(op, "split", {"dim": c_n, "factors": [-1, n]}), _step(op, "split", {"dim": c_m, "factors": [-1, m]}),
            _step(op, "reorder", {"perm": keep + [lead, lead + 2, lead + 1, lead + 3]}),
            _step(av, "split", {"dim": lead, "factors": [-1, m]}),
            _step(av, "reorder", {"perm": keep + [lead, lead + 2, lead + 1]})]
    return acts + _panels(graph, op, bv, n)


def _panels(graph: Graph, op: str, bv: str, n: int) -> list[Step]:
    """B (layout key ``bv``) of matmul ``op`` in panels of ``n`` columns: (N/n) K n."""
    lead = len(graph.tensors[op].shape) - 2
    keep = list(range(lead))
    if graph.node(op).kwargs.get("transpose_b"):  # B stored (N, K)
        return [_step(bv, "split", {"dim": lead, "factors": [-1, n]}),
                _step(bv, "reorder", {"perm": keep + [lead, lead + 2, lead + 1]})]
    return [_step(bv, "split", {"dim": lead + 1, "factors": [-1, n]}),  # B stored (K, N)
            _step(bv, "reorder", {"perm": keep + [lead + 1, lead, lead + 2]})]


def packed_gemv(graph: Graph, op: str, v: int = 16) -> list[Step]:
    """The weight of a matrix-vector product (a matmul of few rows: a decode step) packed for it:
    B (N/v) K v, ``v`` output columns (a vector register's lanes) innermost, so that each thread
    streams whole contiguous panels and every weight line is read once; A and C keep their
    layouts (with one row, NKn's row blocks would only add conversions). A weight stored (N, K)
    (``transpose_b``) ends in the same form; ``v`` larger than N is clipped to N.

    >>> from workbench.engine.models import zoo
    >>> g = zoo.load("llama_layer_decode", hidden=64, heads=4, kv_heads=2, mlp=96, past=8)
    >>> [str(s) for s in packed_gemv(g, "dense5", v=16)]
    ['split(dim=2, factors=[-1, 16])', 'reorder(perm=[0, 2, 1, 3])']"""
    node = graph.node(op)
    if node.type != "matmul":
        raise LayoutError(f"packed_gemv applies to matmul; {op} is {node.label}")
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise LayoutError(f"packed_gemv's v must be a positive number of columns, got {v!r}")
    b = node.inputs[1]
    bv = b if graph.tensors[b].role == "const" else f"{b}@{op}"
    return _panels(graph, op, bv, min(v, graph.tensors[op].shape[-1]))


@dataclass(frozen=True)
class Preset:
    """A named primitive sequence: ``build(graph, target, **params)`` returns its steps;
    ``on`` says what a target is (``tensor``, or ``op``: a complex op by name)."""

    name: str
    build: Callable[..., list[Step]]
    on: str
    op_types: tuple[str, ...] = ()  # for ``op`` presets: the op types (prefixes) it applies to
    defaults: dict[str, Any] = field(default_factory=dict)

    def applies_to(self, graph: Graph, target: str) -> bool:
        """Whether ``target`` (a layout key, or an op name) can take this preset."""
        if self.on == "tensor":
            return target in layout_keys(graph)
        node = next((n for n in graph.nodes if n.name == target), None)
        return node is not None and node.kind == "complex" and node.type.startswith(self.op_types)

    def targets(self, graph: Graph) -> list[str]:
        """Every target of ``graph`` the preset applies to, in graph order."""
        cands = layout_keys(graph) if self.on == "tensor" else [n.name for n in graph.nodes]
        return [t for t in cands if self.applies_to(graph, t)]

    @property
    def label(self) -> str:
        return f"{self.name} (on a {'tensor' if self.on == 'tensor' else ' or '.join(self.op_types) + ' op'})"


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("channels_last", channels_last, "tensor"),
    Preset("blocked", blocked, "tensor", defaults={"factor": 16}),
    Preset("alt_tiled", alt_tiled, "op", ("conv",), {"tiles": 4, "ot": 16, "it": 16, "tile_out": True}),
    Preset("nkn", nkn, "op", ("matmul",), {"m": 16, "n": 16}),
    Preset("packed_gemv", packed_gemv, "op", ("matmul",), {"v": 16}),
)}


def preset_actions(graph: Graph, preset: str, target: str, **params: Any) -> list[Step]:
    """The layout steps preset ``preset`` makes for ``target``; unknown presets and parameters
    are ``LayoutError``s."""
    if preset not in PRESETS:
        raise LayoutError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    p = PRESETS[preset]
    try:
        return p.build(graph, target, **{**p.defaults, **params})
    except TypeError as e:
        raise LayoutError(f"preset {preset}: {e}") from None
