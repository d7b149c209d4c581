"""Destination rows that interleave a few of the source's rows (ALT's stem unfold: rows of W x 3
channels from 3 channel planes), vectorized along the source's rows with the short loop
unrolled inside (``interleaves``, ``interleave``)."""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np
from tvm import tirx

from ...build import codegen
from ...loops.primitives import LoopInfo, block_nest, list_blocks, list_loops
from .borders import borders, open_terms, uses
from ..builder import StepBuilder
from .offsets import CopyAccess
from .pieces import MAX_VECTORS

__all__ = ["interleave", "interleaves"]

#: the most of the source's rows a destination row interleaves for ``interleave`` (its stores
#: merge into one shuffle of as many vectors: ``codegen``'s limit)
_INTERLEAVE = codegen.MOST_STORES


def interleaves(access: CopyAccess | None, names: Sequence[str], loops: Sequence[LoopInfo], lanes: int,
                line: int) -> bool:
    """Whether the destination's rows interleave a few of the source's rows (``interleave``):
    its innermost loop short (2 to ``_INTERLEAVE``, fewer than the lanes) and read at least a
    line apart, the serial loop outside it at least half a vector long, read along the source's
    rows and written that short loop's extent apart. ALT's stem unfold: rows of 37 W x 3
    channels from 3 channel planes; the suite's stem at batch 1, rows of 13 W, one 13-lane
    vector on AVX-512. ``names``: the kernel's loops as lowered (what ``access`` reads);
    ``loops``: as scheduled so far; ``line``: a cache line, in elements."""
    if access is None or len(loops) < 2 or any(lp.name not in names for lp in loops[-2:]):
        return False
    w, c = loops[-2], loops[-1]
    if not 2 <= c.extent <= _INTERLEAVE or c.extent >= lanes or 2 * w.extent < lanes or \
            (w.kind, c.kind) != ("serial", "serial"):  # a row loop that is the parallel one stays whole
        return False
    kw, kc = names.index(w.name), names.index(c.name)

    def strides(k: int) -> tuple[int, int]:
        values: list[Any] = [0] * len(names)
        values[k] = np.array([0, 1])
        src, dst = (np.broadcast_to(x, (2,)) for x in access.offsets(values))
        return int(src[1] - src[0]), int(dst[1] - dst[0])

    (src_w, dst_w), (src_c, dst_c) = strides(kw), strides(kc)
    return src_w == 1 and dst_c == 1 and dst_w == c.extent and abs(src_c) >= line


def interleave(b: StepBuilder, lanes: int) -> None:
    """Vectorize along the source's rows and unroll the short loop inside: ``k`` stores of a
    vector each ``k`` elements apart, which ``codegen.MergeStridedStores`` writes as one dense
    store of a shuffle (with the channels as the vector, each vector would be a three-lane
    gather: ALT's stem unfold, tiles [4, 16]). A pad condition that varies along the rows would leave each lane testing the
    image's border: the loops it varies with are cut first (``borders``, each border value a
    copy of its own), then in each copy the row loop itself where the condition changes
    (``_row_runs``); a piece where TVM cannot tell, or a long one past the row's start (which
    cannot be split), keeps the short loop as the vector (``_row_pieces``). A row that is not a
    whole number of vectors ends in a narrower one."""
    w, c = (lp.name for lp in b.loops()[-2:])
    borders(b, lane=-2)
    # the body's copies: the blocks right inside the row and short loops
    copies = [x for x in list_blocks(b.sch) if [lp.name for lp in list_loops(b.sch, x)][-2:] == [w, c]]
    for block in copies:
        pieces = _row_pieces(_row_runs(b.sch.mod["main"], block), lanes)
        parts = [(block, w)]
        if len(pieces) > 1:
            b.step("loop_partition", on=block, loop=w, factors=[n for n, _ in pieces])
            parts = [(f"{block}_{w}{i}", f"{w}{i}") for i in range(len(pieces))]
        for (on, loop), (n, along) in zip(parts, pieces):
            if not along:
                b.step("vectorize", on=on, loop=c)
                continue
            inner = loop
            if n > lanes:  # whole vectors from the row's start (only a loop from 0 splits)
                b.step("split", on=on, loop=loop, factors=[None, lanes])
                inner = f"{loop}_1"
                b.step("reorder", on=on, loops=[f"{loop}_0", c, inner])
            else:
                b.step("reorder", on=on, loops=[c, inner])
            b.step("unroll", on=on, loop=c)
            b.step("vectorize", on=on, loop=inner)


def _row_pieces(runs: Sequence[tuple[int, bool]], lanes: int) -> list[tuple[int, bool]]:
    """The row loop's pieces (``loop_partition`` counts), each with whether it is a vector along
    the row: a decided run from the row's start in whole vectors (split later) and the rest; one
    further in, vector by vector (a loop that does not start at 0 cannot be split), up to
    ``MAX_VECTORS``; an undecided run, or a longer one, keeps the short loop as the vector.

    >>> _row_pieces([(3, True), (34, True)], 16)
    [(3, True), (16, True), (16, True), (2, True)]
    >>> _row_pieces([(37, True)], 16), _row_pieces([(5, False), (200, True)], 16)
    ([(32, True), (5, True)], [(5, False), (200, False)])
    """
    pieces: list[tuple[int, bool]] = []
    at = 0
    for n, known in runs:
        whole = n // lanes * lanes
        if not known or (at and whole > MAX_VECTORS * lanes):
            pieces.append((n, False))
        elif at == 0:
            pieces += [(whole, True)] * bool(whole) + [(n - whole, True)] * (n > whole)
        else:
            pieces += [(lanes, True)] * (n // lanes) + [(n - whole, True)] * (n > whole)
        at += n
    return pieces


def _row_runs(func: tirx.PrimFunc, block: str) -> list[tuple[int, bool]]:
    """The row loop's (second innermost) values in runs over which TVM's analyzer decides the
    pad condition's terms that vary along it the same way: all hold (the source's row), or one
    fails (zeros); each run's length and whether it is decided (an undecided run, where it
    depends on a loop outside, keeps a condition per lane)."""
    terms, analyzer = open_terms(func, block, lane=-2)
    row = block_nest(func, block)[1][-2]
    terms = [t for t in terms if uses(t, row.loop_var)]
    extent, start = int(row.extent), int(row.min)
    if not terms:
        return [(extent, True)]

    def state(v: int) -> str | None:
        ana = analyzer(row.loop_var, v)
        simple = [ana.rewrite_simplify(t) for t in terms]
        if all(ana.can_prove(t) for t in simple):
            return "in"
        return "out" if any(ana.can_prove(tirx.Not(t)) for t in simple) else None

    return [(len(list(run)), key is not None)
            for key, run in itertools.groupby(state(v) for v in range(start, start + extent))]
