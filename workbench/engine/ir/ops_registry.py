"""The op record and registry (``OpDef``, ``OPS``, ``register``), and the helpers that op
definitions share. ``ops`` imports every family, so that importing it registers the whole library.

Operators never see layouts. ``compute(readers, shapes, attrs, out_shape)`` returns the
function from an output's logical index to its value; it reads each input through a
``reader(idx, windows)`` that lowering builds from the input's layout (ALT section 6: the
access is rewritten, the operator is not). Sliding-window reads pass ``windows`` so an
unfolded input is read tile by tile (the paper's Eq. 1).

Kinds: ``complex`` ops get their own layouts tuned (ALT's C1D, C2D, DEP, GRP, DIL, C3D, GMM,
T2D, T3D); ``elementwise`` ops take layouts by propagation; ``other`` ops stop propagation;
``opaque`` ops are TVM's own TIR for an imported op the library does not model. FLOPs follow
the dense definitions: a multiply-add is 2, every tap of a convolution counts (for a transposed
conv, the taps of each output's stride phase), other operations 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tvm
from tvm import te

from ..base.index import bind_axis

__all__ = ["OpDef", "OPS", "Reader", "Shape", "f32", "lazy_torch", "margin", "names_for", "per_dim",
           "reduce_axis", "reduce_stage", "register", "to_torch"]

Shape = tuple[int, ...]
Reader = Callable[..., Any]  # reader(idx, windows=None) -> PrimExpr
Body = Callable[[list], Any]


@dataclass(frozen=True)
class OpDef:
    type: str
    kind: str  # "complex" | "elementwise" | "other" | "opaque"
    infer: Callable[[list[Shape], dict], Shape]
    compute: Callable[[list[Reader], list[Shape], dict, Shape], Body]
    flops: Callable[[list[Shape], dict, Shape], int]
    reference: Callable[[list[np.ndarray], dict], np.ndarray]
    labeler: Callable[[dict], str] | None = None
    out_dims: Callable[[str, int, dict], str] | None = None

    def label(self, attrs: dict) -> str:
        return self.labeler(attrs) if self.labeler else self.type

    def dims(self, in_dims: str, rank: int, attrs: dict | None = None) -> str:
        if self.out_dims:
            return self.out_dims(in_dims, rank, attrs or {})
        return in_dims if len(in_dims) == rank else "ABCDEFGH"[:rank]


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    OPS[op.type] = op
    return op


def f32(v: float) -> Any:
    """A float32 constant of TIR."""
    return tvm.tirx.const(v, "float32")


def lazy_torch():
    """PyTorch, imported on first use: only references need it."""
    import torch

    return torch


def to_torch(x: np.ndarray):
    """``x`` as a float64 PyTorch tensor (references compute in float64)."""
    return lazy_torch().from_numpy(np.asarray(x, dtype=np.float64))


def reduce_axis(extent: int, name: str) -> Any:
    """A reduction axis whose range the lowering's index simplifier knows."""
    ax = te.reduce_axis((0, extent), name)
    bind_axis(ax.var, extent)
    return ax


def per_dim(a: Mapping, key: str, nd: int, default: int) -> tuple[int, ...]:
    """Attribute ``key`` of ``a`` (an int or one per spatial dim) as one value per dim.

    >>> per_dim({"stride": 2}, "stride", 2, 1), per_dim({"stride": [2, 1]}, "stride", 2, 1)
    ((2, 2), (2, 1))
    """
    v = a.get(key, default)
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd


def reduce_stage(name: str, X: Reader, shape: Shape, axis: int, fn: Callable[[Any, Any], Any]) -> te.Tensor:
    """An auxiliary stage over the logical shape with ``axis`` reduced to 1."""
    red = tuple(1 if d == axis else n for d, n in enumerate(shape))

    def f(*idx):
        r = reduce_axis(shape[axis], f"r_{name}")
        return fn([r if d == axis else i for d, i in enumerate(idx)], r)

    return te.compute(red, f, name=name)


def margin(reader: Reader, dim: int) -> tuple[int, int]:
    """Zeros the reader's stored layout holds before and after logical ``dim`` (none when the
    reader does not say)."""
    held = getattr(reader, "margin", None)
    return held(dim) if held else (0, 0)


def names_for(dims: str, rank: int) -> Sequence[str]:
    """Dim names of a tensor for layouts (one letter each; made unique).

    >>> names_for("NCHW", 4), names_for("NN", 2), names_for("NC", 3)
    (['N', 'C', 'H', 'W'], ['N', 'N2'], ['A', 'B', 'C'])
    """
    if len(dims) != rank:
        dims = "ABCDEFGH"[:rank]
    seen: dict[str, int] = {}
    out = []
    for ch in dims:
        seen[ch] = seen.get(ch, 0) + 1
        out.append(ch if seen[ch] == 1 else f"{ch}{seen[ch]}")
    return out
