"""ALT layout primitives (paper section 4.1): a tensor's layout is the sequence of primitives
applied to it. From the sequence come the stored shape, the map from logical to stored
indices (``forward``) and back (``inverse``, with the conditions under which a stored
element holds data rather than padding), composed of one index map per primitive
(``transforms``). Nothing here is mutated: every primitive returns a new ``Layout``.

>>> lay = Layout.identity((1, 64, 56, 56), "NCHW")
>>> lay.apply("split", dim=1, factors=[4, 16]).apply("reorder", perm=[0, 1, 3, 4, 2])
Layout(N C.o H W C.i, shape=(1, 4, 56, 56, 16))
>>> lay.apply("split", dim=1, factors=[3, 16])
Traceback (most recent call last):
...
workbench.engine.base.errors.LayoutError: split factors [3, 16] multiply to 48 but dim 1 (C) has 64; use a first factor of 4, or -1 to infer it
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base.errors import LayoutError
from ..base.index import Window, all_of
from ..base.step import PrimitiveSpec, Step
from .transforms import (Fold, Fuse, Padded, Reorder, Shift, Slot, Slotted, Split, StoredDim, Transform, Unfold,
                         Unfolded, stored_shape)

__all__ = ["Layout", "PRIMITIVES", "ADVANCED", "INVERSES"]

#: Layout primitive -> its typed arguments (the names are part of the session file format).
PRIMITIVES: dict[str, PrimitiveSpec] = {
    "split": PrimitiveSpec.parse("dim:dim factors:ints", "split a dim into nested dims, outermost first (one "
                                 "factor may be -1: inferred; factors over the extent pad it)"),
    "reorder": PrimitiveSpec.parse("perm:perm", "store the dims in this order (a permutation of all dims)"),
    "fuse": PrimitiveSpec.parse("dims:dims", "fuse adjacent dims into one"),
    "unfold": PrimitiveSpec.parse("dim:dim tile:int stride:int", "cut a dim into overlapping tiles of `tile` "
                                  "elements every `stride` (halos duplicated: ALT's Eq. 1)", defaults={"tile": 4,
                                                                                                    "stride": 2}),
    "fold": PrimitiveSpec.parse("dim:dim", "undo the unfold whose tile dim is `dim`", inverse_of="unfold"),
    "pad": PrimitiveSpec.parse("dim:dim before:int after:int", "add zeros before and after a dim",
                               defaults={"before": 0, "after": 1}),
    "unpad": PrimitiveSpec.parse("dim:dim", "undo the last pad of a dim", inverse_of="pad"),
    "store_at": PrimitiveSpec.parse("into:tensor dim:dim", "store this tensor in an extra slot of another "
                                    "tensor's dim (e.g. a bias beside the weights)"),
    "decouple_at": PrimitiveSpec.parse("dim:dim", "undo the store_at at a dim", inverse_of="store_at"),
}
#: Primitives that change the data (duplicate it, add zeros, or mix tensors): a complex
#: operator does not write such a layout itself, a conversion does (ALT Algorithm 1, line 1).
ADVANCED = frozenset({"unfold", "pad", "store_at"})
#: inverse primitive -> the primitive it undoes
INVERSES = {name: spec.inverse_of for name, spec in PRIMITIVES.items() if spec.inverse_of}


########## Layout ##########

@dataclass(frozen=True, slots=True)
class Layout:
    """A tensor's storage layout: its logical shape and the primitives applied to it."""

    logical: tuple[int, ...]
    names: tuple[str, ...]
    prims: tuple[Step, ...] = ()  # layout steps, their target left empty
    # derived: the stored dims and one transform per primitive
    dims: tuple[StoredDim, ...] = field(default=(), compare=False, repr=False)
    transforms: tuple[Transform, ...] = field(default=(), compare=False, repr=False)
    shape: tuple[int, ...] = field(default=(), compare=False, repr=False)

    @staticmethod
    def identity(shape: Sequence[int], names: str | Sequence[str] | None = None) -> "Layout":
        """The layout a tensor has before any primitive: stored exactly as it is indexed."""
        shape = tuple(int(s) for s in shape)
        if names is None:
            names = [f"d{i}" for i in range(len(shape))]
        names = tuple(names)
        if len(names) != len(shape):
            raise LayoutError(f"{len(names)} dim names for a rank-{len(shape)} tensor")
        dims = tuple(StoredDim(n, i) for i, n in enumerate(names))
        return Layout(shape, names, (), dims, (), shape)

    @staticmethod
    def build(shape: Sequence[int], names: str | Sequence[str] | None, prims: Sequence[Step]) -> "Layout":
        lay = Layout.identity(shape, names)
        for p in prims:
            lay = lay._replay(p)
        return lay

    def _replay(self, p: Step) -> "Layout":
        if p.primitive == "store_at":
            # A host's record of a store_at (``with_slot``: into="<tensor>"): replay the slot, since
            # ``apply`` refuses store_at and a host is rebuilt after a second attachment, a
            # decouple_at of the later one, or a pad+unpad after a store_at.
            return self.with_slot(p.kwargs["dim"], str(p.kwargs["into"]).strip("<>"))
        return self.apply(p.primitive, **p.kwargs)

    ########## properties ##########
    @property
    def is_identity(self) -> bool:
        return not self.prims

    @property
    def advanced(self) -> bool:
        """True when the layout changes data (duplication, zeros, another tensor's slots)."""
        return any(p.primitive in ADVANCED for p in self.prims) or any(
            isinstance(t, Split) and math.prod(t.factors) != t.extent for t in self.transforms)

    @property
    def label(self) -> str:
        return " ".join(d.name for d in self.dims)

    def __repr__(self) -> str:
        return f"Layout({self.label}, shape={self.shape})"

    ########## index maps ##########
    def forward(self, idx: Sequence[Any], windows: dict[int, Window] | None = None) -> list:
        """Stored index of the element at logical index ``idx``."""
        return self.forward_from(0, list(idx), windows)

    def forward_from(self, start: int, idx: list, windows: dict[int, Window] | None = None) -> list:
        win = dict(windows or {})
        for t in self.transforms[start:]:
            idx, win = t.fwd(idx, win)
        return idx

    def inverse(self, idx: Sequence[Any]) -> tuple[list, list]:
        """Logical index held at stored index ``idx``, and the conditions for it to be data
        (where they fail, the stored element is padding and holds zero)."""
        idx, conds = list(idx), []
        for t in reversed(self.transforms):
            idx, c = t.inv(idx)
            conds += c
        return idx, conds

    def to_stored(self, logical: np.ndarray) -> np.ndarray:
        """Convert an array in logical layout to its stored layout (ahead of time, NumPy)."""
        if self.is_identity:
            return logical
        grid = list(np.indices(self.shape, dtype=np.int64))
        src, conds = self.inverse(grid)
        valid = all_of(conds) if conds else np.ones(self.shape, bool)
        src = [np.clip(s, 0, n - 1) for s, n in zip(src, self.logical)]
        return np.where(valid, logical[tuple(src)], 0).astype(logical.dtype)

    def from_stored(self, stored: np.ndarray) -> np.ndarray:
        """Read an array in stored layout back into the logical layout."""
        if self.is_identity:
            return stored
        grid = list(np.indices(self.logical, dtype=np.int64))
        return stored[tuple(self.forward(grid))]

    ########## primitives ##########
    def apply(self, name: str, **args: Any) -> "Layout":
        """Apply one primitive; a bad argument raises ``LayoutError`` and changes nothing."""
        if name not in PRIMITIVES:
            raise LayoutError(f"unknown layout primitive {name!r}; known: {', '.join(PRIMITIVES)}")
        want = set(PRIMITIVES[name].args)
        if name == "pad":
            args.setdefault("before", 0)
            args.setdefault("after", 0)
        missing, extra = want - set(args), set(args) - want
        if missing or extra:
            raise LayoutError(f"{name} takes arguments {sorted(want)}; "
                              + (f"missing {sorted(missing)}" if missing else f"unexpected {sorted(extra)}"))
        if name == "store_at":
            raise LayoutError("store_at involves two tensors: apply it through LayoutBook")
        prims = self.prims + (Step.make("layout", "", name, **args),)
        dims, t = getattr(self, f"_{name}")(**args)
        new = Layout(self.logical, self.names, prims, tuple(dims), self.transforms + (t,),
                     self.shape if t is None else stored_shape(dims, self.shape, t))
        return new._cancel()

    # The primitives by name, each the same as ``apply(name, ...)``.

    def split(self, dim: int, factors: Sequence[int]) -> Layout:
        """Split ``dim`` into nested dims, outermost first; one factor may be -1 (inferred), and
        factors whose product exceeds the extent pad it (the padding holds zeros).

        >>> lay = Layout.identity((1, 64, 56, 56), "NCHW").split(1, [4, 16])
        >>> lay, lay.forward([0, 37, 5, 6])     # channel 37 = 2 * 16 + 5
        (Layout(N C.o C.i H W, shape=(1, 4, 16, 56, 56)), [0, 2, 5, 5, 6])
        """
        return self.apply("split", dim=dim, factors=list(factors))

    def reorder(self, perm: Sequence[int]) -> Layout:
        """Store the dims in the order ``perm`` (new dim i is old dim ``perm[i]``).

        >>> lay = Layout.identity((1, 64, 56, 56), "NCHW").reorder([0, 2, 3, 1])
        >>> lay, lay.forward([0, 37, 5, 6])
        (Layout(N H W C, shape=(1, 56, 56, 64)), [0, 5, 6, 37])
        """
        return self.apply("reorder", perm=list(perm))

    def fuse(self, dims: Sequence[int]) -> Layout:
        """Fuse adjacent dims, in order, into one.

        >>> lay = Layout.identity((2, 3, 4), "ABC").fuse([1, 2])
        >>> lay, lay.forward([1, 2, 3])        # 2 * 4 + 3
        (Layout(A B*C, shape=(2, 12)), [1, 11])
        """
        return self.apply("fuse", dims=list(dims))

    def unfold(self, dim: int, tile: int, stride: int) -> Layout:
        """Cut ``dim`` into overlapping tiles of ``tile`` elements starting every ``stride``
        (ALT's Eq. 1): the halo of each tile is duplicated, so a sliding window reads one tile.

        >>> lay = Layout.identity((10,), "W").unfold(0, tile=4, stride=2)
        >>> lay, lay.to_stored(np.arange(10)).tolist()
        (Layout(W.t W.w, shape=(4, 4)), [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7], [6, 7, 8, 9]])
        """
        return self.apply("unfold", dim=dim, tile=tile, stride=stride)

    def fold(self, dim: int) -> Layout:
        """Undo the unfold whose tile dim is ``dim``.

        >>> Layout.identity((10,), "W").unfold(0, tile=4, stride=2).fold(0)
        Layout(W, shape=(10,))
        """
        return self.apply("fold", dim=dim)

    def pad(self, dim: int, before: int = 0, after: int = 0) -> Layout:
        """Add ``before`` and ``after`` zeros around ``dim``.

        >>> lay = Layout.identity((3, 4), "HW").pad(1, before=1, after=2)
        >>> lay, lay.forward([0, 0]), lay.inverse([0, 0])   # stored (0, 0) is padding
        (Layout(H W, shape=(3, 7)), [0, 1], ([0, -1], [False, True]))
        """
        return self.apply("pad", dim=dim, before=before, after=after)

    def unpad(self, dim: int) -> Layout:
        """Undo the last pad of ``dim``.

        >>> Layout.identity((3, 4), "HW").pad(1, before=1, after=2).reorder([1, 0]).unpad(0)
        Layout(W H, shape=(4, 3))
        """
        return self.apply("unpad", dim=dim)

    def _cancel(self) -> "Layout":
        """An inverse right after its primitive undoes it: drop both, leaving a clean record."""
        if len(self.prims) >= 2:
            last, prev = self.prims[-1], self.prims[-2]
            if INVERSES.get(last.primitive) == prev.primitive and last.kwargs["dim"] == prev.kwargs["dim"]:
                return Layout.build(self.logical, self.names, self.prims[:-2])
        return self

    def _dim(self, dim: Any, what: str = "dim") -> int:
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise LayoutError(f"{what} must be an integer, got {dim!r}")
        if not 0 <= dim < len(self.shape):
            raise LayoutError(f"{what} {dim} out of range: layout {self.label} has {len(self.shape)} dims")
        return int(dim)

    def _desc(self, d: int) -> str:
        return f"dim {d} ({self.dims[d].name})"

    def _split(self, dim, factors):
        d = self._dim(dim)
        n = self.shape[d]
        if not isinstance(factors, (list, tuple)) or len(factors) < 2:
            raise LayoutError(f"split needs a list of at least 2 factors, got {factors!r}")
        if any(not isinstance(f, (int, np.integer)) or isinstance(f, bool) or (f <= 0 and f != -1) for f in factors):
            raise LayoutError(f"split factors must be positive integers (one may be -1), got {list(factors)}")
        if list(factors).count(-1) > 1:
            raise LayoutError("split factors may infer at most one factor with -1")
        if -1 in factors:
            k = list(factors).index(-1)
            known = math.prod(f for f in factors if f != -1)
            factors = [(-(-n // known) if i == k else f) for i, f in enumerate(factors)]
        factors, prod = tuple(int(f) for f in factors), math.prod(factors)
        inner = prod // factors[0]
        if prod < n or (prod > n and factors[0] != -(-n // inner)):
            raise LayoutError(f"split factors {list(factors)} multiply to {prod} but {self._desc(d)} has {n}; "
                              f"use a first factor of {-(-n // inner)}, or -1 to infer it")
        base = self.dims[d].name
        names = [f"{base}.o", f"{base}.i"] if len(factors) == 2 else [f"{base}.{k}" for k in range(len(factors))]
        new = [StoredDim(nm, None) for nm in names]
        return self.dims[:d] + tuple(new) + self.dims[d + 1:], Split(d, factors, n)

    def _reorder(self, perm):
        rank = len(self.shape)
        if not isinstance(perm, (list, tuple)) or sorted(perm) != list(range(rank)):
            raise LayoutError(f"reorder perm {perm!r} is not a permutation of 0..{rank - 1}")
        perm = tuple(int(p) for p in perm)
        return tuple(self.dims[p] for p in perm), Reorder(perm)

    def _fuse(self, dims):
        if not isinstance(dims, (list, tuple)) or len(dims) < 2:
            raise LayoutError(f"fuse needs at least 2 dims, got {dims!r}")
        ds = [self._dim(x) for x in dims]
        if ds != list(range(ds[0], ds[0] + len(ds))):
            raise LayoutError(f"fuse dims {list(dims)} are not adjacent and in order")
        exts = tuple(self.shape[x] for x in ds)
        name = "*".join(self.dims[x].name for x in ds)
        return self.dims[: ds[0]] + (StoredDim(name, None),) + self.dims[ds[-1] + 1:], Fuse(ds[0], exts)

    def _unfold(self, dim, tile, stride):
        d = self._dim(dim)
        n = self.shape[d]
        for v, w in ((tile, "tile"), (stride, "stride")):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
                raise LayoutError(f"unfold {w} must be a positive integer, got {v!r}")
        if tile > n:
            raise LayoutError(f"unfold tile {tile} is larger than {self._desc(d)} = {n}")
        if stride > tile:
            raise LayoutError(f"unfold stride {stride} > tile {tile} would skip elements of {self._desc(d)}")
        tiles = -(-(n - tile) // stride) + 1
        uid = len(self.prims)
        base = self.dims[d]
        t = Unfold(d, n, int(tile), int(stride), tiles)
        new = (StoredDim(f"{base.name}.t", None, base.hist + (Unfolded(uid, 0, t),)),
               StoredDim(f"{base.name}.w", None, base.hist + (Unfolded(uid, 1, t),)))
        return self.dims[:d] + new + self.dims[d + 1:], t

    def _fold(self, dim):
        d = self._dim(dim)
        if d + 1 >= len(self.dims):
            raise LayoutError(f"fold dim {d}: no unfolded pair starts there in {self.label}")
        a, b = self.dims[d].hist[-1:], self.dims[d + 1].hist[-1:]
        if not (a and b and isinstance(a[0], Unfolded) and isinstance(b[0], Unfolded) and a[0].uid == b[0].uid
                and (a[0].part, b[0].part) == (0, 1)):
            raise LayoutError(f"fold dim {d}: dims {d},{d + 1} of {self.label} are not the tile and window "
                              f"dims of one unfold")
        unf = a[0].unfold
        old = self.dims[d]
        name = old.name[:-2] if old.name.endswith(".t") else old.name
        return self.dims[:d] + (StoredDim(name, None, old.hist[:-1]),) + self.dims[d + 2:], Fold(d, unf)

    def _pad(self, dim, before, after):
        d = self._dim(dim)
        for v, w in ((before, "before"), (after, "after")):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                raise LayoutError(f"pad {w} must be a non-negative integer, got {v!r}")
        if before == after == 0:
            raise LayoutError(f"pad of {self._desc(d)} by 0 and 0 does nothing")
        old = self.dims[d]
        new = StoredDim(old.name, old.origin, old.hist + (Padded(int(before), int(after), self.shape[d]),))
        return (self.dims[:d] + (new,) + self.dims[d + 1:],
                Shift(d, int(before), self.shape[d], True))

    def _unpad(self, dim):
        d = self._dim(dim)
        h = self.dims[d].hist[-1:]
        if not h or not isinstance(h[0], Padded):
            raise LayoutError(f"unpad {self._desc(d)}: its last change was not a pad")
        before, extent = h[0].before, h[0].extent
        old = self.dims[d]
        return (self.dims[:d] + (StoredDim(old.name, old.origin, old.hist[:-1]),) + self.dims[d + 1:],
                Shift(d, before, extent, False))

    def _decouple_at(self, dim):
        raise LayoutError("decouple_at involves two tensors: apply it through LayoutBook")

    def with_slot(self, dim: int, tensor: str) -> "Layout":
        """Host side of store_at: ``dim`` grows by one slot that holds ``tensor``."""
        d = self._dim(dim)
        old = self.dims[d]
        dims = self.dims[:d] + (StoredDim(old.name, old.origin, old.hist + (Slotted(tensor),)),) + self.dims[d + 1:]
        t = Slot(d, self.shape[d])
        prims = self.prims + (Step.make("layout", "", "store_at", into=f"<{tensor}>", dim=d),)
        return Layout(self.logical, self.names, prims, dims, self.transforms + (t,), stored_shape(dims, self.shape, t))

    def zero_margin(self, dim: int) -> tuple[int, int]:
        """Zeros stored before and after logical ``dim`` by pads of it (while it was still one
        stored dim): a sliding window may read that far past the data with no bounds test.

        >>> lay = Layout.identity((2, 5), "CW").split(0, [1, 2]).pad(2, before=1, after=2)
        >>> lay.zero_margin(1), lay.zero_margin(0), lay.unfold(2, tile=4, stride=2).zero_margin(1)
        ((1, 2), (0, 0), (1, 2))
        """
        lay, pads = Layout.identity(self.logical, self.names), []
        for p in self.prims:
            if p.primitive in ("pad", "unpad") and lay.dims[p.kwargs["dim"]].origin == dim:
                if p.primitive == "pad":
                    pads.append((p.kwargs["before"], p.kwargs["after"]))
                else:
                    pads.pop()
            lay = lay._replay(p)
        return sum(b for b, _ in pads), sum(a for _, a in pads)

    def without_last(self) -> "Layout":
        return Layout.build(self.logical, self.names, self.prims[:-1]) if self.prims else self
