"""The layout algebra (ALT section 4.1): each primitive's stored shape, index maps and their
inverses (on ints, NumPy arrays and TVM expressions), data round trips checked against an
independent NumPy model of every primitive, unfold's duplication (Eq. 1), store_at /
decouple_at, and specific refusals that leave the layout unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tvm
from hypothesis import assume, given, strategies as st
from tvm.sym.analyzer import Analyzer

from workbench.engine.base.errors import LayoutError
from workbench.engine.base.index import Window
from workbench.engine.build.program import make_program
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_layout, current
from workbench.engine.layout.primitives import Layout
from workbench.engine.models import zoo


TARGET = {"kind": "llvm", "num-cores": 2}


def _grid(shape):
    return list(np.indices(shape).reshape(len(shape), -1))


def _cdiv(a, b):
    return -(-a // b)


########## An independent NumPy model of each primitive (what the stored array must be) ##########

def np_split(a, dim, factors):
    """Zero-pad ``dim`` to the product of the factors, then reshape it into them."""
    n = a.shape[dim]
    pad = [(0, 0)] * a.ndim
    pad[dim] = (0, math.prod(factors) - n)
    a = np.pad(a, pad)
    return a.reshape(a.shape[:dim] + tuple(factors) + a.shape[dim + 1:])


def np_fuse(a, first, count):
    return a.reshape(a.shape[:first] + (-1,) + a.shape[first + count:])


def np_pad(a, dim, before, after):
    pad = [(0, 0)] * a.ndim
    pad[dim] = (before, after)
    return np.pad(a, pad)


def np_unfold(a, dim, tile, stride):
    """Overlapping tiles: tile t holds elements t*stride .. t*stride+tile-1 (zeros past the end)."""
    n = a.shape[dim]
    tiles = _cdiv(n - tile, stride) + 1
    a = np_pad(a, dim, 0, (tiles - 1) * stride + tile - n)
    parts = [np.take(a, np.arange(t * stride, t * stride + tile), axis=dim) for t in range(tiles)]
    return np.stack(parts, axis=dim)


########## Stored shapes ##########

@pytest.mark.parametrize("shape, prim, args, want", [
    ((2, 64, 5, 7), "split", {"dim": 1, "factors": [4, 16]}, (2, 4, 16, 5, 7)),
    ((2, 64, 5, 7), "split", {"dim": 1, "factors": [-1, 16]}, (2, 4, 16, 5, 7)),
    ((2, 64, 5, 7), "split", {"dim": 1, "factors": [2, -1, 4]}, (2, 2, 8, 4, 5, 7)),
    ((2, 10, 5, 7), "split", {"dim": 1, "factors": [-1, 4]}, (2, 3, 4, 5, 7)),  # pads 10 -> 12
    ((2, 64, 5, 7), "reorder", {"perm": [0, 2, 3, 1]}, (2, 5, 7, 64)),
    ((2, 64, 5, 7), "fuse", {"dims": [2, 3]}, (2, 64, 35)),
    ((2, 64, 5, 7), "fuse", {"dims": [0, 1, 2]}, (640, 7)),
    ((2, 64, 5, 7), "pad", {"dim": 3, "before": 1, "after": 2}, (2, 64, 5, 10)),
    ((2, 64, 5, 7), "pad", {"dim": 2, "after": 3}, (2, 64, 8, 7)),
    ((1, 3, 230, 230), "unfold", {"dim": 2, "tile": 13, "stride": 8}, (1, 3, 29, 13, 230)),
    ((10,), "unfold", {"dim": 0, "tile": 4, "stride": 3}, (3, 4)),
    ((11,), "unfold", {"dim": 0, "tile": 4, "stride": 3}, (4, 4)),
    ((5,), "unfold", {"dim": 0, "tile": 5, "stride": 2}, (1, 5)),
])
def test_each_primitive_has_the_stored_shape_of_the_table(shape, prim, args, want):
    lay = Layout.identity(shape).apply(prim, **args)
    assert lay.shape == want
    assert lay.logical == shape and len(lay.dims) == len(want)
    if prim == "unfold":  # the table's closed form: ceil((D - B) / S) + 1 tiles of B
        d, b, s = args["dim"], args["tile"], args["stride"]
        assert want[d:d + 2] == (math.ceil((shape[d] - b) / s) + 1, b)


def test_inverse_primitives_give_the_shape_back():
    base = Layout.identity((6, 10), "HW")
    un = base.apply("unfold", dim=1, tile=4, stride=2)
    assert un.apply("fold", dim=1).is_identity and un.apply("fold", dim=1).shape == (6, 10)
    # fold after another primitive in between (not a plain cancellation)
    mid = un.apply("pad", dim=0, before=1, after=0).apply("fold", dim=1)
    assert mid.shape == (7, 10) and len(mid.prims) == 3
    padded = base.apply("pad", dim=0, before=2, after=1)
    assert padded.apply("unpad", dim=0).is_identity
    # unpad of a dim whose pad came before a reorder: the dim is found by its history
    moved = padded.apply("reorder", perm=[1, 0]).apply("unpad", dim=1)
    assert moved.shape == (10, 6)
    data = np.arange(60, dtype=np.float32).reshape(6, 10) + 1
    np.testing.assert_array_equal(moved.to_stored(data), data.T)
    np.testing.assert_array_equal(mid.to_stored(data), np_pad(data, 0, 1, 0))


########## Random sequences of split / reorder / fuse / pad (Hypothesis) ##########

@st.composite
def layouts(draw, unfold: bool = False):
    """A random shape, a random sequence of primitives on it, and the same sequence as NumPy
    operations (the model the stored array is checked against)."""
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=3)))
    lay, model = Layout.identity(shape), []
    kinds = ["split", "reorder", "fuse", "pad"] + (["unfold"] if unfold else [])
    for _ in range(draw(st.integers(1, 4))):
        rank, kind = len(lay.shape), draw(st.sampled_from(kinds))
        d = draw(st.integers(0, rank - 1))
        n = lay.shape[d]
        if kind == "split":
            inner = draw(st.lists(st.integers(1, 4), min_size=1, max_size=2))
            factors = [_cdiv(n, math.prod(inner)), *inner]
            given_ = [-1, *inner] if draw(st.booleans()) else factors
            lay = lay.apply("split", dim=d, factors=given_)
            model.append(lambda a, d=d, f=factors: np_split(a, d, f))
        elif kind == "reorder":
            perm = draw(st.permutations(range(rank)))
            lay = lay.apply("reorder", perm=perm)
            model.append(lambda a, p=perm: np.transpose(a, p))
        elif kind == "fuse" and d + 1 < rank:
            k = draw(st.integers(2, rank - d))
            lay = lay.apply("fuse", dims=list(range(d, d + k)))
            model.append(lambda a, d=d, k=k: np_fuse(a, d, k))
        elif kind == "pad":
            before, after = draw(st.integers(0, 2)), draw(st.integers(1, 2))
            lay = lay.apply("pad", dim=d, before=before, after=after)
            model.append(lambda a, d=d, b=before, e=after: np_pad(a, d, b, e))
        elif kind == "unfold":
            tile = draw(st.integers(1, n))
            stride = draw(st.integers(1, tile))
            lay = lay.apply("unfold", dim=d, tile=tile, stride=stride)
            model.append(lambda a, d=d, t=tile, s=stride: np_unfold(a, d, t, s))
    return lay, model


def _model(model, data):
    for f in model:
        data = f(data)
    return data


@given(layouts(), st.integers(0, 2**31 - 1))
def test_forward_then_inverse_is_the_identity_on_random_indices(case, seed):
    lay, _ = case
    rng = np.random.default_rng(seed)
    idx = [rng.integers(0, n, size=32) for n in lay.logical]
    stored = lay.forward(idx)
    assert all(np.all((s >= 0) & (s < n)) for s, n in zip(stored, lay.shape))  # inside the buffer
    back, conds = lay.inverse(stored)
    assert all(np.array_equal(b, i) for b, i in zip(back, idx))
    assert all(np.all(c) for c in conds)  # a logical element is never stored in a padding slot
    # the same on plain ints
    one = [int(i[0]) for i in idx]
    assert lay.inverse(lay.forward(one))[0] == one


@given(layouts(), st.integers(0, 2**31 - 1))
def test_stored_data_matches_the_numpy_model_and_reads_back(case, seed):
    lay, model = case
    data = np.random.default_rng(seed).uniform(1, 2, lay.logical).astype(np.float32)  # never 0
    want = _model(model, data)
    assert lay.shape == want.shape
    stored = lay.to_stored(data)
    np.testing.assert_array_equal(stored, want)
    np.testing.assert_array_equal(lay.from_stored(stored), data)
    # split / reorder / fuse / pad store each element exactly once; the rest is zero padding
    assert np.count_nonzero(stored) == data.size


@given(layouts(), st.integers(0, 2**31 - 1))
def test_every_stored_position_is_data_or_padding_and_the_maps_are_a_bijection(case, seed):
    lay, model = case
    grid = _grid(lay.shape)
    src, conds = lay.inverse(grid)
    valid = np.ones(grid[0].shape, bool)
    for c in conds:
        valid &= np.asarray(c, bool)
    assert valid.sum() == math.prod(lay.logical)  # as many data slots as logical elements
    back = lay.forward([s[valid] for s in src])
    assert all(np.array_equal(b, g[valid]) for b, g in zip(back, grid))
    # the model agrees on which slots are padding
    want = _model(model, np.ones(lay.logical, np.float32)).reshape(-1)
    np.testing.assert_array_equal(want != 0, valid)


@given(layouts(unfold=True), st.integers(0, 2**31 - 1))
def test_with_unfold_the_stored_data_still_matches_the_model(case, seed):
    lay, model = case
    data = np.random.default_rng(seed).uniform(1, 2, lay.logical).astype(np.float32)
    stored = lay.to_stored(data)
    np.testing.assert_array_equal(stored, _model(model, data))
    np.testing.assert_array_equal(lay.from_stored(stored), data)
    back, _ = lay.inverse(lay.forward(_grid(lay.logical)))
    assert all(np.array_equal(b, g) for b, g in zip(back, _grid(lay.logical)))


def test_index_maps_on_tvm_expressions_agree_with_ints():
    lay = (Layout.identity((2, 10, 7, 9), "NCHW").apply("split", dim=1, factors=[-1, 4])
           .apply("reorder", perm=[0, 1, 3, 4, 2]).apply("fuse", dims=[2, 3]).apply("pad", dim=1, before=1, after=0)
           .apply("unfold", dim=2, tile=20, stride=9))
    vs = [tvm.tirx.Var(n, "int32") for n in "nchw"]
    fwd = lay.forward(vs)
    assert all(isinstance(e, tvm.ir.base.Node) for e in fwd)
    rng = np.random.default_rng(0)
    for _ in range(20):
        idx = [int(rng.integers(0, n)) for n in lay.logical]
        ana = Analyzer()
        for v, x in zip(vs, idx):
            ana.bind(v, tvm.tirx.const(x, "int32"))
        got = [int(ana.simplify(e)) for e in fwd]
        assert got == lay.forward(idx)
        ana = Analyzer()
        svars = [tvm.tirx.Var(f"t{k}", "int32") for k in range(len(lay.shape))]
        inv, conds = lay.inverse(svars)
        for v, x in zip(svars, got):
            ana.bind(v, tvm.tirx.const(x, "int32"))
        assert [int(ana.simplify(e)) for e in inv] == idx
        assert all(bool(ana.simplify(c)) for c in conds)


########## unfold (overlapped tiling) and ALT's Eq. 1 ##########

def test_unfold_of_the_design_example():
    """unfold of [1,2,3,4,5] with B=3, S=2 gives [[1,2,3],[3,4,5]] (design page)."""
    lay = Layout.identity((5,)).apply("unfold", dim=0, tile=3, stride=2)
    np.testing.assert_array_equal(lay.to_stored(np.array([1, 2, 3, 4, 5], np.float32)), [[1, 2, 3], [3, 4, 5]])


@pytest.mark.parametrize("d, tile, stride", [(10, 4, 3), (11, 4, 3), (230, 13, 8), (9, 9, 1), (7, 3, 3), (8, 1, 1)])
def test_unfold_duplicates_the_overlaps_and_fold_restores(d, tile, stride):
    lay = Layout.identity((2, d), "CW").apply("unfold", dim=1, tile=tile, stride=stride)
    tiles = math.ceil((d - tile) / stride) + 1
    assert lay.shape == (2, tiles, tile) and lay.advanced
    data = np.random.default_rng(d).uniform(1, 2, (2, d)).astype(np.float32)
    stored = lay.to_stored(data)
    for t in range(tiles):
        for r in range(tile):
            x = t * stride + r
            assert stored[1, t, r] == (data[1, x] if x < d else 0)
    # an element in an overlap is held by every tile that covers it
    copies = sum(1 for t in range(tiles) if t * stride <= d - 1 < t * stride + tile)
    assert np.count_nonzero(stored[0] == data[0, d - 1]) == copies
    np.testing.assert_array_equal(lay.from_stored(stored), data)
    folded = lay.apply("fold", dim=1)
    assert folded.is_identity and folded.shape == (2, d)


@given(V=st.integers(1, 3), extra=st.integers(0, 3), q=st.integers(1, 4), count=st.integers(1, 12),
       pad=st.integers(0, 2))
def test_a_sliding_window_reads_one_tile_per_output_tile_as_in_eq_1(V, extra, q, count, pad):
    """An access V*i + r (r in [0, M)) to a dim unfolded with B = (q-1)*V + M, S = q*V goes to
    tile i // (floor((B - M) / V) + 1), offset V*i + r - S * tile (ALT Eq. 1)."""
    M = V + extra  # a window at least as wide as its stride: the input is covered
    B, S = (q - 1) * V + M, q * V
    D = (count - 1) * V + M  # the padded extent the windows cover exactly
    assume(B <= D and D - 2 * pad >= 1)
    lay = Layout.identity((D - 2 * pad,), "W")
    if pad:
        lay = lay.apply("pad", dim=0, before=pad, after=pad)
    lay = lay.apply("unfold", dim=0, tile=B, stride=S)
    i, r = np.arange(count)[:, None], np.arange(M)[None, :]
    win = Window(i, V, r - pad, -pad, M, count)  # logical access V*i + r - pad, as a conv's
    t, pos = lay.forward([V * i + r - pad], {0: win})
    t, pos = np.broadcast_to(t, (count, M)), np.broadcast_to(pos, (count, M))
    tile = i // ((B - M) // V + 1)
    np.testing.assert_array_equal(t, np.broadcast_to(tile, (count, M)))
    np.testing.assert_array_equal(pos, np.broadcast_to(V * i + r - S * tile, (count, M)))
    assert pos.min() >= 0 and pos.max() < B and t.max() < lay.shape[0]
    data = np.random.default_rng(D).uniform(1, 2, D - 2 * pad).astype(np.float32)
    padded = np.pad(data, (pad, pad))
    np.testing.assert_array_equal(lay.to_stored(data)[t, pos], padded[V * i + r])


def test_a_window_that_does_not_fit_the_tiles_still_reads_the_right_element():
    lay = Layout.identity((20,)).apply("unfold", dim=0, tile=6, stride=4)
    i, r = np.arange(9)[:, None], np.arange(3)[None, :]
    win = Window(i, 2, r, 0, 3, 9)  # 2 outputs per tile would need stride 4: fits; stride 3 below not
    data = np.arange(20, dtype=np.float32) + 1
    stored = lay.to_stored(data)
    np.testing.assert_array_equal(stored[tuple(lay.forward([2 * i + r], {0: win}))], data[2 * i + r])
    i3 = np.arange(6)[:, None]
    win3 = Window(i3, 3, r, 0, 3, 6)
    np.testing.assert_array_equal(stored[tuple(lay.forward([3 * i3 + r], {0: win3}))], data[3 * i3 + r])


########## split that does not divide: pads, or is refused with its reason ##########

def test_a_split_that_does_not_divide_pads_with_zeros_and_keeps_the_numbers():
    lay = Layout.identity((1, 10), "NC").apply("split", dim=1, factors=[-1, 4])
    assert lay.shape == (1, 3, 4) and lay.advanced
    data = np.arange(10, dtype=np.float32).reshape(1, 10) + 1
    stored = lay.to_stored(data)
    np.testing.assert_array_equal(stored.reshape(-1), [*range(1, 11), 0, 0])
    np.testing.assert_array_equal(lay.from_stored(stored), data)
    # explicit factors with the same padding are accepted too
    assert Layout.identity((1, 10), "NC").apply("split", dim=1, factors=[3, 4]).shape == (1, 3, 4)


@pytest.mark.parametrize("n, factors, prod, first", [(64, [3, 16], 48, 4), (64, [5, 16], 80, 4), (10, [4, 4], 16, 3),
                                                     (60, [3, 4, 8], 96, 2)])
def test_a_split_with_wrong_factors_is_refused_with_the_numbers(n, factors, prod, first):
    lay = Layout.identity((2, n), "NC")
    if math.prod(factors) >= n and factors[0] == _cdiv(n, math.prod(factors[1:])):
        pytest.fail("case is a valid padding split")
    with pytest.raises(LayoutError) as e:
        lay.apply("split", dim=1, factors=factors)
    msg = str(e.value)
    assert f"split factors {factors} multiply to {prod} but dim 1 (C) has {n}" in msg
    assert f"use a first factor of {first}" in msg


########## Refusals: specific, and nothing changes ##########

@pytest.mark.parametrize("prim, args, message", [
    ("split", {"dim": 1, "factors": [3, 16]}, "split factors [3, 16] multiply to 48 but dim 1 (C) has 64"),
    ("split", {"dim": 7, "factors": [4, 16]}, "dim 7 out of range: layout N C H W has 4 dims"),
    ("split", {"dim": 1, "factors": [-1, -1]}, "at most one factor"),
    ("split", {"dim": 1, "factors": [0, 64]}, "split factors must be positive integers (one may be -1), got [0, 64]"),
    ("split", {"dim": 1, "factors": [64]}, "at least 2 factors"),
    ("split", {"dim": 1.5, "factors": [4, 16]}, "dim must be an integer, got 1.5"),
    ("reorder", {"perm": [0, 1, 1, 2]}, "reorder perm [0, 1, 1, 2] is not a permutation of 0..3"),
    ("reorder", {"perm": [0, 1, 2]}, "not a permutation of 0..3"),
    ("fuse", {"dims": [1, 3]}, "fuse dims [1, 3] are not adjacent"),
    ("fuse", {"dims": [2]}, "fuse needs at least 2 dims"),
    ("unfold", {"dim": 2, "tile": 200, "stride": 1}, "unfold tile 200 is larger than dim 2 (H) = 112"),
    ("unfold", {"dim": 2, "tile": 4, "stride": 5}, "unfold stride 5 > tile 4 would skip elements"),
    ("unfold", {"dim": 2, "tile": 0, "stride": 1}, "unfold tile must be a positive integer, got 0"),
    ("fold", {"dim": 2}, "are not the tile and window dims of one unfold"),
    ("fold", {"dim": 3}, "no unfolded pair starts there"),
    ("pad", {"dim": 2, "before": 0, "after": 0}, "pad of dim 2 (H) by 0 and 0 does nothing"),
    ("pad", {"dim": 2, "before": -1, "after": 0}, "pad before must be a non-negative integer, got -1"),
    ("unpad", {"dim": 2}, "unpad dim 2 (H): its last change was not a pad"),
    ("split", {"dim": 1}, "missing ['factors']"),
    ("split", {"dim": 1, "factors": [4, 16], "axis": 0}, "unexpected ['axis']"),
    ("tile", {"dim": 1}, "unknown layout primitive 'tile'"),
    ("decouple_at", {"dim": 1}, "decouple_at: nothing is stored at dim 1 of conv"),
])
def test_refusals_are_specific_and_change_nothing(prim, args, message):
    graph = zoo.load("r18_stem")
    book = apply_layout(graph, LayoutBook(), "conv", "reorder", {"perm": [0, 1, 2, 3]})  # a prior layout
    before = current(graph, book, "conv")
    with pytest.raises(LayoutError) as e:
        apply_layout(graph, book, "conv", prim, args)
    assert message in str(e.value)
    assert current(graph, book, "conv") == before and book.get("conv") == before


def test_refusals_of_a_layout_object_leave_it_unchanged():
    lay = Layout.identity((1, 64, 8, 8), "NCHW").apply("split", dim=1, factors=[4, 16])
    snapshot = (lay.shape, lay.prims, lay.label)
    with pytest.raises(LayoutError, match=r"split factors \[3, 5\] multiply to 15 but dim 2 \(C.i\) has 16"):
        lay.apply("split", dim=2, factors=[3, 5])
    assert (lay.shape, lay.prims, lay.label) == snapshot


def test_unknown_keys_are_refused():
    graph = zoo.load("r18_stem")
    with pytest.raises(Exception, match="unknown tensor 'nope'"):
        apply_layout(graph, LayoutBook(), "nope", "split", {"dim": 0, "factors": [1, 1]})
    with pytest.raises(LayoutError, match="relu is not a complex op reading data"):
        apply_layout(graph, LayoutBook(), "data@relu", "split", {"dim": 1, "factors": [1, 3]})


########## store_at / decouple_at ##########

def test_store_at_puts_the_bias_next_to_each_weight_row_and_decouple_at_undoes_it():
    graph = zoo.load("r18_stem")
    book = apply_layout(graph, LayoutBook(), "bias.bias", "store_at", {"into": "conv.weight", "dim": 1})
    host = current(graph, book, "conv.weight")
    assert host.shape == (64, 4, 7, 7)  # 3 input channels + 1 slot holding the bias
    assert book.storage("bias.bias") == "conv.weight" and book.attachment("bias.bias").host == "conv.weight"
    # the bias element of output channel o lives in the slot of row o
    assert book.forward("bias.bias", Layout.identity((64,)), [5]) == [5, 3, 0, 0]
    prog = make_program(graph, book)
    values = graph.random_inputs(seed=4)
    from workbench.engine.build.lower import stored_constants
    w = stored_constants(prog.plan, values)["conv.weight"]
    np.testing.assert_array_equal(w[:, :3], values["conv.weight"])
    np.testing.assert_array_equal(w[:, 3, 0, 0], values["bias.bias"])
    assert np.count_nonzero(w[:, 3]) == 64  # the rest of the slot row is zero
    # the program reads the bias from the weight's slot and still computes the same numbers
    assert "bias.bias" not in prog.plan.buffers and prog.build(TARGET).verify(values).ok
    back = apply_layout(graph, book, "bias.bias", "decouple_at", {"dim": 1})
    assert back.storage("bias.bias") == "bias.bias" and not back.attachments
    assert current(graph, back, "conv.weight").is_identity


def test_store_at_after_and_before_other_primitives_of_the_host():
    graph = zoo.load("r18_stem")
    # the attached tensor must match the host's stored dims: after a split of O, a (64,) bias does not
    split = apply_layout(graph, LayoutBook(), "conv.weight", "split", {"dim": 0, "factors": [4, 16]})
    with pytest.raises(LayoutError, match=r"store_at: bias.bias has shape \(64,\) but conv.weight without dim 2 "
                                          r"\(I\) starts with \(4,\)"):
        apply_layout(graph, split, "bias.bias", "store_at", {"into": "conv.weight", "dim": 2})
    with pytest.raises(LayoutError, match=r"conv.weight without dim 0 \(O\) starts with \(3,\)"):
        apply_layout(graph, LayoutBook(), "bias.bias", "store_at", {"into": "conv.weight", "dim": 0})
    # store_at first, then the host is split: the bias follows its row
    book = apply_layout(graph, LayoutBook(), "bias.bias", "store_at", {"into": "conv.weight", "dim": 1})
    book = apply_layout(graph, book, "conv.weight", "split", {"dim": 0, "factors": [4, 16]})
    assert current(graph, book, "conv.weight").shape == (4, 16, 4, 7, 7)
    assert book.forward("bias.bias", Layout.identity((64,)), [37]) == [2, 5, 3, 0, 0]
    # a later primitive on the host, and a pad + unpad pair that cancels (the host is rebuilt)
    later = apply_layout(graph, book, "conv.weight", "reorder", {"perm": [0, 2, 3, 4, 1]})
    assert current(graph, later, "conv.weight").shape == (4, 4, 7, 7, 16)
    again = apply_layout(graph, apply_layout(graph, later, "conv.weight", "pad", {"dim": 0, "after": 1}),
                         "conv.weight", "unpad", {"dim": 0})
    assert current(graph, again, "conv.weight") == current(graph, later, "conv.weight")
    assert make_program(graph, later).build(TARGET).verify(graph.random_inputs(seed=5)).ok
    with pytest.raises(LayoutError, match="conv.weight has primitives after the store_at of bias.bias"):
        apply_layout(graph, later, "bias.bias", "decouple_at", {"dim": 1})
    with pytest.raises(LayoutError, match="bias.bias is stored inside conv.weight \\(store_at\\); decouple_at first"):
        apply_layout(graph, book, "bias.bias", "split", {"dim": 0, "factors": [4, 16]})


def test_two_tensors_stored_into_one_host():
    b = GraphBuilder("two")
    x = b.input("data", (1, 4, 6, 6))
    c = b.op("conv", "conv2d", x, b.const("conv.weight", (8, 4, 3, 3)))
    y = b.op("b1", "bias_add", c, b.const("b1.bias", (8,)), axis=1)
    b.op("b2", "bias_add", y, b.const("b2.bias", (8,)), axis=1)
    g = b.build()
    book = apply_layout(g, LayoutBook(), "b1.bias", "store_at", {"into": "conv.weight", "dim": 1})
    book = apply_layout(g, book, "b2.bias", "store_at", {"into": "conv.weight", "dim": 1})
    assert current(g, book, "conv.weight").shape == (8, 6, 3, 3)
    assert book.forward("b1.bias", Layout.identity((8,)), [2]) == [2, 4, 0, 0]
    assert book.forward("b2.bias", Layout.identity((8,)), [2]) == [2, 5, 0, 0]
    assert make_program(g, book).build(TARGET).verify(g.random_inputs(seed=6)).ok
    back = apply_layout(g, book, "b2.bias", "decouple_at", {"dim": 1})
    assert current(g, back, "conv.weight").shape == (8, 5, 3, 3) and back.storage("b1.bias") == "conv.weight"


@pytest.mark.parametrize("key, args, message", [
    ("conv", {"into": "conv.weight", "dim": 1}, "store_at works on constants"),
    ("bias.bias", {"into": "nope", "dim": 1}, "store_at into unknown tensor 'nope'"),
    ("bias.bias", {"into": "bias.bias", "dim": 0}, "bias.bias cannot be stored into itself"),
    ("bias.bias", {"into": "conv.weight", "dim": 9}, "dim 9 out of range"),
])
def test_store_at_refusals(key, args, message):
    graph = zoo.load("r18_stem")
    with pytest.raises(LayoutError, match=message.replace("(", r"\(").replace(")", r"\)")):
        apply_layout(graph, LayoutBook(), key, "store_at", args)
    split = apply_layout(graph, LayoutBook(), "bias.bias", "split", {"dim": 0, "factors": [4, 16]})
    with pytest.raises(LayoutError, match="already has layout primitives; store_at must come first"):
        apply_layout(graph, split, "bias.bias", "store_at", {"into": "conv.weight", "dim": 1})
