"""The index maps behind the layout primitives (``layout.transforms``), each on its own: ``inv``
undoes ``fwd`` at every logical index, every stored index that holds data maps back to one, and
``stored_shape`` is the extent the forward map reaches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from workbench.engine.layout.transforms import (Fold, Fuse, Padded, Reorder, Shift, Slot, Split, StoredDim, Unfold,
                                                stored_shape)

SHAPE = (3, 10)
UNFOLD = Unfold(dim=1, extent=10, tile=4, stride=3, tiles=3)
# (transform, the stored dims after it: only a pad's history is read by stored_shape)
CASES = {
    "split": (Split(dim=1, factors=(2, 5), extent=10), ()),
    "split_padding": (Split(dim=1, factors=(4, 3), extent=10), ()),
    "reorder": (Reorder(perm=(1, 0)), ()),
    "fuse": (Fuse(first=0, extents=(3, 10)), ()),
    "unfold": (UNFOLD, ()),
    "pad": (Shift(dim=1, before=2, extent=10, padded=True),
            (StoredDim("A", 0), StoredDim("B", 1, (Padded(2, 1, 10),)))),
    "slot": (Slot(dim=0, extent=3), ()),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_inverse_undoes_forward_and_every_stored_data_index_maps_back(case):
    t, dims = CASES[case]
    shape = stored_shape(dims, SHAPE, t)
    stored = set()
    for idx in itertools.product(*map(range, SHAPE)):
        fwd, _ = t.fwd(list(idx), {})
        assert all(0 <= i < n for i, n in zip(fwd, shape)), (idx, fwd, shape)
        back, conds = t.inv(list(fwd))
        assert tuple(back) == idx and all(conds)
        stored.add(tuple(fwd))
    for s in itertools.product(*map(range, shape)):
        back, conds = t.inv(list(s))
        if all(conds):
            assert tuple(t.fwd(list(back), {})[0]) == s or isinstance(t, Unfold)  # an unfold duplicates halos
            assert all(0 <= i < n for i, n in zip(back, SHAPE))
        else:
            assert s not in stored  # padding: no logical element is stored there


def test_fold_undoes_its_unfold_and_the_maps_run_on_numpy_index_arrays():
    fold = Fold(dim=1, unfold=UNFOLD)
    grid = list(np.indices(SHAPE))
    unfolded, _ = UNFOLD.fwd(grid, {})
    assert stored_shape((), SHAPE, UNFOLD) == (3, 3, 4)
    folded, _ = fold.fwd(unfolded, {})
    assert all((f == g).all() for f, g in zip(folded, grid))
    assert stored_shape((), (3, 3, 4), fold) == SHAPE
    assert [a.tolist() for a in fold.inv(grid)[0]] == [a.tolist() for a in unfolded]
