"""Layout actions on a graph: apply a primitive to a tensor by name, and the presets that
expand into primitive sequences (NHWC, channel blocking, ALT's tiled C2D template, GMM's NKn).

A layout key is a tensor name, or ``"T@op"``: the layout complex op ``op`` wants for its input
``T`` (see ``propagate``). Every function returns a new ``LayoutBook``; a refused primitive
raises ``LayoutError`` and the book is unchanged.
"""

from __future__ import annotations

from typing import Any

from .errors import LayoutError
from .graph import Graph
from .layout import Layout, LayoutBook
from .propagate import base_layout

__all__ = ["layout_keys", "key_base", "apply_layout", "apply_actions", "PRESETS", "preset_actions"]

Action = tuple[str, str, dict[str, Any]]  # (key, primitive, args)


def layout_keys(graph: Graph) -> list[str]:
    """Every key a layout can be applied to: tensors, then complex ops' input views."""
    keys = list(graph.tensors)
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
        if node.kind != "complex" or tensor not in node.inputs:
            raise LayoutError(f"{key}: {op} is not a complex op reading {tensor}")
    return base_layout(graph, tensor)


def current(graph: Graph, book: LayoutBook, key: str) -> Layout:
    return book.get(key) or key_base(graph, key)


def apply_layout(graph: Graph, book: LayoutBook, key: str, primitive: str, args: dict[str, Any]) -> LayoutBook:
    """Apply one primitive to the tensor (or input view) ``key``."""
    base = key_base(graph, key)
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


def apply_actions(graph: Graph, book: LayoutBook, actions: list[Action]) -> LayoutBook:
    """Apply several primitives, all or nothing."""
    for key, prim, args in actions:
        book = apply_layout(graph, book, key, prim, args)
    return book


########## Presets ##########

def _to_last(rank: int, dim: int) -> list[int]:
    return [d for d in range(rank) if d != dim] + [dim]


def channels_last(graph: Graph, tensor: str) -> list[Action]:
    """NCHW -> NHWC (any rank: the channel dim 1 moves last)."""
    rank = len(key_base(graph, tensor).shape)
    return [(tensor, "reorder", {"perm": _to_last(rank, 1)})]


def blocked(graph: Graph, tensor: str, factor: int = 16, dim: int = 1) -> list[Action]:
    """N(C/c)HW(c): split dim ``dim`` by ``factor`` and move the inner part last."""
    rank = len(key_base(graph, tensor).shape)
    return [(tensor, "split", {"dim": dim, "factors": [-1, factor]}),
            (tensor, "reorder", {"perm": _to_last(rank + 1, dim + 1)})]


def _tile_perm(nd: int) -> list[int]:
    """N C.o C.i S1.o S1.i ... -> N S1.o .. C.o S1.i .. C.i"""
    return [0] + [3 + 2 * j for j in range(nd)] + [1] + [4 + 2 * j for j in range(nd)] + [2]


def alt_tiled(graph: Graph, op: str, tiles: list[int] | int = 4, ot: int = 16, it: int = 16,
              wot: int | None = None, wit: int | None = None) -> list[Action]:
    """ALT's one-level conv template (paper section 5): output N(H/ht)(W/wt)(O/ot) ht wt ot,
    input N(H/ht)(W/wt)(I/it)(ht+KH-1)(wt+KW-1) it through unfold (overlapped tiles, so each
    output tile reads one contiguous input tile), weight (O/ot)(I/it) KH KW it ot."""
    node = graph.node(op)
    if not node.type.startswith("conv"):
        raise LayoutError(f"alt_tiled applies to convolutions; {op} is {node.label}")
    x, w = node.inputs[:2]
    out_shape = graph.tensors[op].shape
    nd = len(out_shape) - 2
    tl = [tiles] * nd if isinstance(tiles, int) else list(tiles)
    if len(tl) != nd:
        raise LayoutError(f"alt_tiled on {op} needs {nd} tile sizes, got {tl}")
    a = node.kwargs
    as_t = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd  # noqa: E731
    s, p, d = as_t(a.get("stride", 1)), as_t(a.get("padding", 0)), as_t(a.get("dilation", 1))
    ks = graph.tensors[w].shape[2:]
    cin = graph.tensors[x].shape[1]
    # A tile larger than the output is clipped to it, for the output split AND the input unfold
    # (unclipped, the unfold's stride tl*s outgrew its tile and the preset was refused).
    tl = [min(t, n) for t, n in zip(tl, out_shape[2:])]
    acts: list[Action] = []
    for j in reversed(range(nd)):
        acts.append((op, "split", {"dim": 2 + j, "factors": [-1, tl[j]]}))
    acts += [(op, "split", {"dim": 1, "factors": [-1, min(ot, out_shape[1])]}), (op, "reorder", {"perm": _tile_perm(nd)})]
    view = f"{x}@{op}"
    if node.type.startswith("conv_transpose"):
        acts += blocked(graph, view, min(it, cin))
    else:
        for j in reversed(range(nd)):
            if p[j]:
                acts.append((view, "pad", {"dim": 2 + j, "before": p[j], "after": p[j]}))
        for j in reversed(range(nd)):
            span = (ks[j] - 1) * d[j] + 1
            extent = graph.tensors[x].shape[2 + j] + 2 * p[j]
            # A stride larger than the kernel span (e.g. a 1x1 conv with stride 2) leaves gaps
            # between the input windows; the tile then covers a whole stride (unfold never skips
            # elements). One tile clipped to the whole dim needs no stride beyond it.
            tile = min(max((tl[j] - 1) * s[j] + span, tl[j] * s[j]), extent)
            acts.append((view, "unfold", {"dim": 2 + j, "tile": tile, "stride": min(tl[j] * s[j], tile)}))
        acts += [(view, "split", {"dim": 1, "factors": [-1, min(it, cin)]}), (view, "reorder", {"perm": _tile_perm(nd)})]
    wshape = graph.tensors[w].shape
    wo, wi = min(wot or ot, wshape[0]), min(wit or it, wshape[1])
    rank = len(wshape)
    acts += [(w, "split", {"dim": 1, "factors": [-1, wi]}), (w, "split", {"dim": 0, "factors": [-1, wo]}),
             (w, "reorder", {"perm": [0, 2] + list(range(4, rank + 2)) + [3, 1]})]
    return acts


def nkn(graph: Graph, op: str, m: int = 16, n: int = 16) -> list[Action]:
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
    acts: list[Action] = [(op, "split", {"dim": c_n, "factors": [-1, n]}), (op, "split", {"dim": c_m, "factors": [-1, m]}),
                          (op, "reorder", {"perm": keep + [lead, lead + 2, lead + 1, lead + 3]}),
                          (av, "split", {"dim": lead, "factors": [-1, m]}),
                          (av, "reorder", {"perm": keep + [lead, lead + 2, lead + 1]})]
    if node.kwargs.get("transpose_b"):  # B stored (N, K)
        acts += [(bv, "split", {"dim": lead, "factors": [-1, n]}), (bv, "reorder", {"perm": keep + [lead, lead + 2, lead + 1]})]
    else:  # B stored (K, N)
        acts += [(bv, "split", {"dim": lead + 1, "factors": [-1, n]}),
                 (bv, "reorder", {"perm": keep + [lead + 1, lead, lead + 2]})]
    return acts


#: name -> (builder, what it applies to, default parameters)
PRESETS: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "channels_last": (channels_last, "tensor", {}),
    "blocked": (blocked, "tensor", {"factor": 16}),
    "alt_tiled": (alt_tiled, "conv op", {"tiles": 4, "ot": 16, "it": 16}),
    "nkn": (nkn, "matmul op", {"m": 16, "n": 16}),
}


def preset_actions(graph: Graph, preset: str, target: str, **params: Any) -> list[Action]:
    if preset not in PRESETS:
        raise LayoutError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    fn, _, defaults = PRESETS[preset]
    try:
        return fn(graph, target, **{**defaults, **params})
    except TypeError as e:
        raise LayoutError(f"preset {preset}: {e}") from None


def access_text(lay: Layout) -> str:
    """How an access to the logical element is rewritten under ``lay``, e.g.
    ``[n, c, h, w] → [n, c // 16, h, w, c % 16]`` (shown before a primitive is applied)."""
    import tvm

    names = [n.lower() for n in lay.names]
    names = [n if names.count(n) == 1 else f"{n}{i}" for i, n in enumerate(names)]
    idx = lay.forward([tvm.tirx.Var(n, "int32") for n in names])
    return f"[{', '.join(names)}] → [{', '.join(str(i) for i in idx)}]"
