"""The layout algebra (ALT section 4.1): stored shapes, index maps and their inverses, data
round trips, unfold's duplication (Eq. 1), store_at, and specific refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.engine import zoo
from workbench.engine.errors import LayoutError
from workbench.engine.layout import Layout, LayoutBook
from workbench.engine.layouts import apply_layout, current


def _grid(shape):
    return list(np.indices(shape).reshape(len(shape), -1))


def test_split_reorder_fuse_shapes_and_maps():
    lay = Layout.identity((2, 64, 5, 7), "NCHW").apply("split", dim=1, factors=[4, 16])
    assert lay.shape == (2, 4, 16, 5, 7) and lay.label == "N C.o C.i H W"
    assert lay.forward([1, 37, 2, 3]) == [1, 2, 5, 2, 3]  # 37 = 2 * 16 + 5
    lay = lay.apply("reorder", perm=[0, 1, 3, 4, 2])
    assert lay.shape == (2, 4, 5, 7, 16)
    assert lay.forward([1, 37, 2, 3]) == [1, 2, 2, 3, 5]
    fused = lay.apply("fuse", dims=[2, 3])
    assert fused.shape == (2, 4, 35, 16)
    assert fused.forward([1, 37, 2, 3]) == [1, 2, 2 * 7 + 3, 5]


@st.composite
def layouts(draw):
    """A random shape and a random sequence of split / reorder / fuse / pad on it."""
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    lay = Layout.identity(shape)
    for _ in range(draw(st.integers(1, 4))):
        rank = len(lay.shape)
        kind = draw(st.sampled_from(["split", "reorder", "fuse", "pad"]))
        d = draw(st.integers(0, rank - 1))
        if kind == "split":
            inner = draw(st.integers(1, 4))
            lay = lay.apply("split", dim=d, factors=[-1, inner])
        elif kind == "reorder":
            lay = lay.apply("reorder", perm=draw(st.permutations(range(rank))))
        elif kind == "fuse" and d + 1 < rank:
            lay = lay.apply("fuse", dims=[d, d + 1])
        elif kind == "pad":
            lay = lay.apply("pad", dim=d, before=draw(st.integers(0, 2)), after=draw(st.integers(1, 2)))
    return lay


@given(layouts(), st.integers(0, 2**31 - 1))
def test_forward_then_inverse_is_the_identity_and_data_round_trips(lay, seed):
    data = np.random.default_rng(seed).standard_normal(lay.logical).astype(np.float32)
    idx = _grid(lay.logical)
    back, conds = lay.inverse(lay.forward(idx))
    assert all(np.array_equal(b, i) for b, i in zip(back, idx))
    stored = lay.to_stored(data)
    assert stored.shape == lay.shape
    np.testing.assert_array_equal(lay.from_stored(stored), data)
    # every logical element is stored exactly once; the rest of the stored tensor is zero padding
    assert np.count_nonzero(stored) == np.count_nonzero(data)
    assert math.prod(lay.shape) >= math.prod(lay.logical)


def test_unfold_duplicates_overlapping_tiles_as_in_eq_1():
    """D=10, tile 4, stride 3: ceil((10-4)/3)+1 = 3 tiles holding [0..3], [3..6], [6..9]."""
    lay = Layout.identity((10,), "H").apply("unfold", dim=0, tile=4, stride=3)
    assert lay.shape == (3, 4)
    data = np.arange(10, dtype=np.float32) + 1
    stored = lay.to_stored(data)
    np.testing.assert_array_equal(stored, [[1, 2, 3, 4], [4, 5, 6, 7], [7, 8, 9, 10]])
    np.testing.assert_array_equal(lay.from_stored(stored), data)
    assert lay.advanced  # it changes data: a complex op does not write it itself
    assert Layout.identity((10,), "H").apply("unfold", dim=0, tile=4, stride=3).apply("fold", dim=0).is_identity


def test_unfold_with_a_ragged_last_tile_pads():
    lay = Layout.identity((11,), "W").apply("unfold", dim=0, tile=4, stride=3)
    assert lay.shape == (math.ceil((11 - 4) / 3) + 1, 4)
    data = np.arange(11, dtype=np.float32) + 1
    stored = lay.to_stored(data)
    assert stored[3, 0] == 10 and stored[3, 1] == 11 and stored[3, 2] == stored[3, 3] == 0
    np.testing.assert_array_equal(lay.from_stored(stored), data)


def test_pad_then_unpad_and_padding_holds_zeros():
    lay = Layout.identity((3, 4), "HW").apply("pad", dim=1, before=1, after=2)
    assert lay.shape == (3, 7)
    data = np.ones((3, 4), np.float32)
    stored = lay.to_stored(data)
    assert stored[:, 0].sum() == 0 and stored[:, 5:].sum() == 0 and stored[:, 1:5].sum() == 12
    assert lay.apply("unpad", dim=1).is_identity


def test_a_split_that_does_not_divide_pads_and_keeps_the_numbers():
    lay = Layout.identity((1, 10), "NC").apply("split", dim=1, factors=[-1, 4])
    assert lay.shape == (1, 3, 4) and lay.advanced
    data = np.arange(10, dtype=np.float32).reshape(1, 10) + 1
    stored = lay.to_stored(data)
    assert stored[0, 2, 2] == 0 and stored[0, 2, 3] == 0  # the two padding slots
    np.testing.assert_array_equal(lay.from_stored(stored), data)


@pytest.mark.parametrize("prim, args, message", [
    ("split", {"dim": 1, "factors": [3, 16]}, "split factors [3, 16] multiply to 48 but dim 1 (C) has 64"),
    ("split", {"dim": 7, "factors": [4, 16]}, "dim 7 out of range"),
    ("split", {"dim": 1, "factors": [-1, -1]}, "at most one factor"),
    ("split", {"dim": 1, "factors": [0, 64]}, "positive integers"),
    ("reorder", {"perm": [0, 1, 1, 2]}, "not a permutation of 0..3"),
    ("fuse", {"dims": [1, 3]}, "not adjacent"),
    ("unfold", {"dim": 2, "tile": 200, "stride": 1}, "larger than dim 2 (H) = 112"),
    ("unfold", {"dim": 2, "tile": 4, "stride": 5}, "would skip elements"),
    ("fold", {"dim": 2}, "are not the tile and window dims of one unfold"),
    ("pad", {"dim": 2, "before": 0, "after": 0}, "does nothing"),
    ("unpad", {"dim": 2}, "was not a pad"),
    ("split", {"dim": 1}, "missing ['factors']"),
    ("tile", {"dim": 1}, "unknown layout primitive 'tile'"),
])
def test_refusals_are_specific_and_change_nothing(prim, args, message):
    graph = zoo.load("r18_stem")
    book = LayoutBook()
    with pytest.raises(LayoutError) as e:
        apply_layout(graph, book, "conv", prim, args)
    assert message in str(e.value)
    assert book.get("conv") is None and current(graph, book, "conv").is_identity


def test_store_at_attaches_a_bias_to_its_weight_and_decouple_at_undoes_it():
    graph = zoo.load("r18_stem")
    book = apply_layout(graph, LayoutBook(), "bias.bias", "store_at", {"into": "conv.weight", "dim": 1})
    host = current(graph, book, "conv.weight")
    assert host.shape == (64, 4, 7, 7)  # 3 input channels + 1 slot holding the bias
    assert book.storage("bias.bias") == "conv.weight"
    back = apply_layout(graph, book, "bias.bias", "decouple_at", {"dim": 1})
    assert back.storage("bias.bias") == "bias.bias" and current(graph, back, "conv.weight").shape == (64, 3, 7, 7)
    with pytest.raises(LayoutError, match="store_at works on constants"):
        apply_layout(graph, LayoutBook(), "conv", "store_at", {"into": "conv.weight", "dim": 1})
