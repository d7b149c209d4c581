"""A padded read's borders cut apart from its interior: the loops whose values enter the block's
pad condition are cut into border and interior ranges (``borders``, by ``loop_partition``), so
that TVM proves the condition within each interior copy and drops it there. ``open_terms``: the
condition's terms TVM cannot prove over the block's loops."""

from __future__ import annotations

from typing import Any, Callable

import tvm
from tvm import tirx
from tvm.sym import Analyzer

from ...loops.primitives import LoopInfo, block_nest, list_blocks, list_loops
from ..builder import StepBuilder

__all__ = ["borders", "open_terms", "uses"]

#: the most loops ``borders`` cuts into border and interior ranges (each cut copies the body
#: once per range: two cuts, up to nine copies)
_BORDER_LOOPS = 2
#: the longest border range ``borders`` cuts a value at a time for a vector along an inner
#: loop (``interleave``): in each such copy the row's own borders are then constants
_BORDER_VALUES = 2


def borders(b: StepBuilder, lane: int = -1) -> None:
    """Cut the loops whose values enter the block's pad condition into border and interior ranges
    (``loop_partition``), innermost first, at most ``_BORDER_LOOPS`` of them: TVM then proves the
    condition within each interior copy and drops it there (a vector whose lanes each carry the
    condition compiles to a branch and a scalar copy per lane: ALT's stem unfold)."""
    cuts = _interiors(b.sch.mod["main"], b.block, lane)[:_BORDER_LOOPS]
    for k, (loop, lo, hi, along) in enumerate(cuts):
        counts = [n for n in (lo, hi - lo, loop.extent - hi) if n]
        if lane != -1 and along and max(lo, loop.extent - hi) <= _BORDER_VALUES:
            # a vector along a loop inside whose border moves with this loop: a value at a time
            counts = [1] * lo + [hi - lo] + [1] * (loop.extent - hi)
        # the first cut is in the block; the loops outside a cut enclose its copies' common block
        on = b.block if k == 0 else next(x for x in list_blocks(b.sch)
                                         if any(lp.name == loop.name for lp in list_loops(b.sch, x)))
        b.step("loop_partition", on=on, loop=loop.name, factors=counts)


def open_terms(func: tirx.PrimFunc, block: str, lane: int = -1) -> tuple[list[Any], Callable[..., Analyzer]]:
    """The terms of ``block``'s pad condition that TVM's analyzer cannot prove over the block's
    loops, when one of them varies along loop ``lane`` (the vector's; else none), and a maker of
    analyzers over those loops (one of them fixed at a value)."""
    realize, fors = block_nest(func, block)
    cond = _pad_condition(realize.block.body)
    ranges = {f.loop_var: tvm.ir.Range.from_min_extent(f.min, f.extent) for f in fors}

    def analyzer(fixed: Any = None, value: int = 0) -> Analyzer:
        ana = Analyzer()
        for var, rng in ranges.items():
            ana.bind(var, tvm.ir.Range.from_min_extent(value, 1) if var.same_as(fixed) else rng)
        for iv, val in zip(realize.block.iter_vars, realize.iter_values):
            ana.bind(iv.var, val)
        return ana

    if cond is None or len(fors) < -lane:
        return [], analyzer
    full = analyzer()
    terms = [t for t in (full.rewrite_simplify(t) for t in _conjuncts(cond)) if not full.can_prove(t)]
    if not any(uses(t, fors[lane].loop_var) for t in terms):
        return [], analyzer  # a condition the vector's lanes share costs a branch per vector only
    return terms, analyzer


def _interiors(func: tirx.PrimFunc, block: str, lane: int = -1) -> list[tuple[LoopInfo, int, int, bool]]:
    """The serial loops of ``block`` with an interior: a range ``[lo, hi)`` of the loop's values,
    at least half its extent and not all of it, where TVM's analyzer proves every term of the
    pad condition (``if_then_else`` around the block's value) that the loop enters, for every
    value of the other loops; innermost first. None unless the condition varies across the
    vector's lanes (loop ``lane``; the loops inside a vector loop other than the innermost are
    not cut): where the lanes share it (ALT's 3x3 unfold, channels in the vector), a branch per
    vector costs less than the copies a cut makes. Each with whether a term it enters varies
    along the vector's loop too."""
    terms, analyzer = open_terms(func, block, lane)
    if not terms:  # (none also where there are fewer loops than ``lane`` reaches)
        return []
    fors = block_nest(func, block)[1]
    infos = list_loops(func, block)
    lane_var = fors[lane].loop_var
    if lane != -1:
        fors, infos = fors[:lane], infos[:lane]
    out = []
    for f, info in reversed(list(zip(fors, infos))):
        used = [t for t in terms if uses(t, f.loop_var)]
        if info.kind != "serial" or info.extent < 3 or not used:
            continue
        start = int(f.min)
        inside = [v for v in range(start, start + info.extent)
                  if all((ana := analyzer(f.loop_var, v)).can_prove(ana.rewrite_simplify(t)) for t in used)]
        if inside and inside[-1] - inside[0] + 1 == len(inside) and info.extent / 2 <= len(inside) < info.extent:
            out.append((info, inside[0] - start, inside[-1] + 1 - start, any(uses(t, lane_var) for t in used)))
    return out


def uses(expr: Any, var: tirx.Var) -> bool:
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr))


def _pad_condition(body: Any) -> Any:
    """The condition of the ``if_then_else`` a conversion block stores (a pad), or None."""
    value = getattr(body, "value", None)
    if isinstance(value, tvm.ir.Call) and str(value.op.name).endswith(".if_then_else"):
        return value.args[0]
    return None


def _conjuncts(cond: Any) -> list[Any]:
    if isinstance(cond, tirx.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]
