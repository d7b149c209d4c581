"""Which layout dims a kernel's loops run over: ``i1`` of a conv writing ALT's tiled layout is
``H.o``, a split of it ``H.o (1/2)`` and ``H.o (2/2)``, a fused loop ``N·C.o``, a reduction loop
keeps its own name (``rc``). TVM names a stage's loops ``i0, i1, ...`` after the stored shape's
positions (names that loop actions and tuned traces refer to, so they stay); this only labels them.

A block's spatial iterators are matched to the dims of the buffer it writes by its write region
(``writes[0]``: a dim indexed by exactly one iterator is that iterator's dim), so a cache stage
(``conv_local``) or a block moved by ``compute_at`` is labelled too; a loop is labelled with the
iterators whose bindings it appears in.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

from tvm import tirx

from .nest import FuncOrSchedule, block_nests, printed_loop_names

__all__ = ["loop_dims"]

#: suffixes TVM's cache_read / cache_write give a stage's copy (the copy holds the same dims)
_SCOPES = ("_local", "_global", "_shared")


def loop_dims(func_or_sch: FuncOrSchedule, stage_dims: Mapping[str, Sequence[str]]) -> dict[str, dict[str, str]]:
    """Block -> loop name -> the layout dims it runs over, for the blocks whose written buffer
    (or the block itself) is a stage of ``stage_dims`` (stage name -> its dims' names, outermost
    first; e.g. ``Layout.label.split()`` of ``lower.stage_layouts``). Loops that run over no known
    dim are left out.

    >>> from tvm import te
    >>> x = te.placeholder((4, 32), name="x")
    >>> y = te.compute((4, 32), lambda i, j: x[i, j] * 2.0, name="y")
    >>> from tvm import s_tir
    >>> sch = s_tir.Schedule(te.create_prim_func([x, y]))
    >>> _ = sch.split(sch.get_loops(sch.get_sblock("y"))[1], [None, 8])
    >>> loop_dims(sch, {"y": ["C", "W"]})
    {'y': {'i': 'C', 'j_0': 'W (1/2)', 'j_1': 'W (2/2)'}}
    """
    out: dict[str, dict[str, str]] = {}
    for realize, loops in block_nests(func_or_sch):
        block = realize.block
        dims = _stage(stage_dims, [block.writes[0].source.name, block.name_hint] if block.writes else [block.name_hint])
        if dims is None:
            continue
        label: dict[int, str] = {}  # iterator position -> dim name
        region = block.writes[0].region
        if len(region) == len(dims):
            for d, rng in enumerate(region):
                for k, iv in enumerate(block.iter_vars):
                    if rng.min.same_as(iv.var):
                        label[k] = dims[d]
        for k, iv in enumerate(block.iter_vars):
            if iv.iter_type == tirx.IterVar.CommReduce:
                label[k] = iv.var.name.removeprefix("v_")  # TVM's prefix for a block's iterators
        names = printed_loop_names([f.loop_var.name for f in loops])
        runs = {}
        for name, f in zip(names, loops):
            over = [label[k] for k, e in enumerate(realize.iter_values)
                    if k in label and any(v.same_as(f.loop_var) for v in tirx.analysis.undefined_vars(e))]
            if over:
                runs[name] = "·".join(over)
        count, seen = Counter(runs.values()), Counter()
        for name, dim in runs.items():
            if count[dim] > 1:
                seen[dim] += 1
                runs[name] = f"{dim} ({seen[dim]}/{count[dim]})"
        out[block.name_hint] = runs
    return out


def _stage(stage_dims: Mapping[str, Sequence[str]], names: Sequence[str]) -> Sequence[str] | None:
    for name in names:
        for base in (name, *(name.removesuffix(s) for s in _SCOPES if name.endswith(s))):
            if base in stage_dims:
                return stage_dims[base]
    return None
