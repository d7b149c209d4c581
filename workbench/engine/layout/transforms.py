"""The index maps behind the layout primitives: one transform per primitive applied (``fwd``:
the current dims' index to the next one's, carrying sliding windows along; ``inv``: back, with
the conditions under which the element is data rather than padding), what each stored dim is
(``StoredDim``, with the history that inverses and windows need) and the stored shape after a
transform. The maps use only ``//``, ``%``, ``+`` and ``*``, so they run on Python ints, NumPy
index arrays and TVM ``PrimExpr`` alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..base.index import Window, minimum

__all__ = ["Fold", "Fuse", "Padded", "Reorder", "Shift", "Slot", "Slotted", "Split", "StoredDim", "Transform",
           "Unfold", "Unfolded", "stored_shape"]


@dataclass(frozen=True, slots=True)
class Padded:
    """A pad of the dim: ``before`` and ``after`` zeros around ``extent`` elements."""

    before: int
    after: int
    extent: int


@dataclass(frozen=True, slots=True)
class Unfolded:
    """One of the two dims an unfold made (``part`` 0: the tile index, 1: the window), tagged
    with the unfold's ``uid`` so fold finds the pair."""

    uid: int
    part: int
    unfold: "Unfold"


@dataclass(frozen=True, slots=True)
class Slotted:
    """The dim grew a slot holding ``tensor`` (store_at's host side)."""

    tensor: str


@dataclass(frozen=True, slots=True)
class StoredDim:
    """What a current dim is: its name, and its history for inverses and windows."""

    name: str
    origin: int | None  # logical dim it still indexes one-to-one (pads allowed), else None
    hist: tuple[Padded | Unfolded | Slotted, ...] = ()


class Transform:
    """The index map of one applied primitive, from the stored dims before it to those after it."""

    def fwd(self, idx: list, win: dict[int, Window]) -> tuple[list, dict[int, Window]]:
        raise NotImplementedError

    def inv(self, idx: list) -> tuple[list, list]:
        raise NotImplementedError


@dataclass(frozen=True)
class Split(Transform):
    dim: int
    factors: tuple[int, ...]
    extent: int

    def fwd(self, idx, win):
        x, out, inner = idx[self.dim], [], math.prod(self.factors)
        for k, f in enumerate(self.factors):
            inner //= f
            q = x // inner if inner > 1 else x
            out.append(q % f if k else q)
        return idx[: self.dim] + out + idx[self.dim + 1:], _drop_win(win, self.dim, len(self.factors))

    def inv(self, idx):
        n = len(self.factors)
        parts, x = idx[self.dim: self.dim + n], 0
        for p, f in zip(parts, self.factors):
            x = x * f + p
        conds = [x < self.extent] if math.prod(self.factors) != self.extent else []
        return idx[: self.dim] + [x] + idx[self.dim + n:], conds


@dataclass(frozen=True)
class Reorder(Transform):
    perm: tuple[int, ...]

    def fwd(self, idx, win):
        where = {old: new for new, old in enumerate(self.perm)}
        return [idx[p] for p in self.perm], {where[d]: w for d, w in win.items()}

    def inv(self, idx):
        out = [None] * len(idx)
        for new, old in enumerate(self.perm):
            out[old] = idx[new]
        return out, []


@dataclass(frozen=True)
class Fuse(Transform):
    first: int
    extents: tuple[int, ...]

    def fwd(self, idx, win):
        n, x = len(self.extents), 0
        for p, e in zip(idx[self.first: self.first + n], self.extents):
            x = x * e + p
        return idx[: self.first] + [x] + idx[self.first + n:], _drop_win(win, self.first, 1, n)

    def inv(self, idx):
        x, parts = idx[self.first], []
        for e in reversed(self.extents):
            parts.append(x % e)
            x = x // e
        return idx[: self.first] + parts[::-1] + idx[self.first + 1:], []


@dataclass(frozen=True)
class Unfold(Transform):
    dim: int
    extent: int
    tile: int
    stride: int
    tiles: int

    def _canonical(self, x):
        t = minimum(x // self.stride, self.tiles - 1)
        return t, x - t * self.stride

    def fwd(self, idx, win):
        w = win.get(self.dim)
        t = r = None
        if w is not None and w.lo >= 0:
            q = (self.tile - (w.lo + w.size)) // w.stride + 1  # output positions per input tile
            if q >= 1 and q * w.stride == self.stride and (w.count - 1) // q < self.tiles:
                t = w.i // q if q > 1 else w.i
                r = w.stride * (w.i % q if q > 1 else 0) + w.offset
        if t is None:
            t, r = self._canonical(idx[self.dim])
        return idx[: self.dim] + [t, r] + idx[self.dim + 1:], _drop_win(win, self.dim, 2)

    def inv(self, idx):
        x = idx[self.dim] * self.stride + idx[self.dim + 1]
        conds = [x < self.extent] if (self.tiles - 1) * self.stride + self.tile > self.extent else []
        return idx[: self.dim] + [x] + idx[self.dim + 2:], conds


@dataclass(frozen=True)
class Fold(Transform):
    dim: int
    unfold: Unfold

    def fwd(self, idx, win):
        x = idx[self.dim] * self.unfold.stride + idx[self.dim + 1]
        return idx[: self.dim] + [x] + idx[self.dim + 2:], _drop_win(win, self.dim, 1, 2)

    def inv(self, idx):
        t, r = self.unfold._canonical(idx[self.dim])
        return idx[: self.dim] + [t, r] + idx[self.dim + 1:], []


@dataclass(frozen=True)
class Shift(Transform):
    """pad (shift > 0 grows the dim) and unpad (crops it back)."""

    dim: int
    before: int
    extent: int  # extent of the data inside the new dim
    padded: bool

    def fwd(self, idx, win):
        d, b = self.dim, self.before if self.padded else -self.before
        win = {k: (w.shifted(b) if k == d else w) for k, w in win.items()}
        return idx[:d] + [idx[d] + b] + idx[d + 1:], win

    def inv(self, idx):
        d = self.dim
        if not self.padded:
            return idx[:d] + [idx[d] + self.before] + idx[d + 1:], []
        y = idx[d] - self.before
        conds = ([y >= 0] if self.before else []) + [y < self.extent]
        return idx[:d] + [y] + idx[d + 1:], conds


@dataclass(frozen=True)
class Slot(Transform):
    """store_at's host side: one extra slot at the end of ``dim`` holds another tensor."""

    dim: int
    extent: int

    def fwd(self, idx, win):
        return idx, win

    def inv(self, idx):
        return idx, [idx[self.dim] < self.extent]


def _drop_win(win: dict[int, Window], at: int, new: int, old: int = 1) -> dict[int, Window]:
    """Windows after dims ``at .. at+old`` were replaced by ``new`` dims (theirs are lost)."""
    out = {}
    for d, w in win.items():
        if d < at:
            out[d] = w
        elif d >= at + old:
            out[d + new - old] = w
    return out


def stored_shape(dims: Sequence[StoredDim], old: tuple[int, ...], t: Transform) -> tuple[int, ...]:
    """Stored shape after transform ``t`` (``dims``: the stored dims it made, ``old``: the shape before it)."""
    if isinstance(t, Split):
        return old[: t.dim] + t.factors + old[t.dim + 1:]
    if isinstance(t, Reorder):
        return tuple(old[p] for p in t.perm)
    if isinstance(t, Fuse):
        n = len(t.extents)
        return old[: t.first] + (math.prod(t.extents),) + old[t.first + n:]
    if isinstance(t, Unfold):
        return old[: t.dim] + (t.tiles, t.tile) + old[t.dim + 1:]
    if isinstance(t, Fold):
        return old[: t.dim] + (t.unfold.extent,) + old[t.dim + 2:]
    if isinstance(t, Shift):
        if t.padded:
            after = dims[t.dim].hist[-1].after
            return old[: t.dim] + (old[t.dim] + t.before + after,) + old[t.dim + 1:]
        return old[: t.dim] + (t.extent,) + old[t.dim + 1:]
    if isinstance(t, Slot):
        return old[: t.dim] + (old[t.dim] + 1,) + old[t.dim + 1:]
    raise TypeError(t)
