"""Cache profile of a scheduled kernel: per loop level, the data one iteration touches, and the
misses each cache takes (ALT's Tables 2 and 3 argue with this model).

- **Footprint** of buffer B at loop L: the distinct elements, cache lines and contiguous runs of
  lines of B that one iteration of L touches (the loops outside L, and L, at their first value),
  computed exactly from the blocks' buffer accesses (``BufferFootprint``);
- **where it stops fitting**: along the main loop chain, the outermost level whose footprint fits;
- **estimated misses** per cache: a level that fits brings its footprint in once per iteration
  (``_misses``; the prefetch-aware estimate counts runs instead of lines), within the compulsory
  and inclusion bounds (``_bounded``).

It needs no hardware counters and no simulation (``profile_kernel`` says what it leaves out);
``counters.perf_counters`` reads the paper's Table 3 counters with Linux ``perf`` where it can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
import pandas as pd
import tvm
from tvm import s_tir, tirx

from ..loops.primitives import visit_nodes, walk_nest

if TYPE_CHECKING:
    from .ceilings import Ceilings

__all__ = ["Access", "BufferFootprint", "Level", "Profile", "profile_kernel", "accesses"]

#: largest set of points enumerated for one group of dims, and for one buffer's addresses
_MAX_POINTS = 1 << 23


@dataclass(frozen=True)
class Access:
    """One buffer access of a block: index expressions over loop variables."""

    buffer: str
    shape: tuple[int, ...]
    itemsize: int
    indices: tuple[Any, ...]  # TIR expressions of loop variables


@dataclass(frozen=True)
class BufferFootprint:
    """What one iteration of a loop touches of a buffer: distinct elements, bytes, cache lines,
    and **runs** (maximal ranges of adjacent cache lines). The buffer's dims are grouped by the
    loop variables they share, each group is enumerated with NumPy, and the groups combine as a
    Cartesian product (they index different dims). Indices outside the buffer are left out (a
    pad's guarded read, a ``T.where`` tail: never accessed). A group whose loop box exceeds
    ``_MAX_POINTS`` points is not enumerated: its count is bounded by the buffer's extent there,
    lines assume a dense layout, and ``exact`` is False."""

    elements: int
    bytes: int
    lines: int
    runs: int
    exact: bool = True


@dataclass(frozen=True)
class Level:
    """One iteration of loop ``loop`` (``"(kernel)"`` for the whole kernel)."""

    depth: int
    loop: str
    extent: int
    iterations: int  # how many times an iteration of this loop runs in the whole kernel
    buffers: dict[str, BufferFootprint]

    @property
    def bytes(self) -> int:
        return sum(b.bytes for b in self.buffers.values())

    @property
    def lines(self) -> int:
        return sum(b.lines for b in self.buffers.values())

    @property
    def runs(self) -> int:
        return sum(b.runs for b in self.buffers.values())


@dataclass(frozen=True)
class Profile:
    kernel: str
    levels: list[Level]
    caches: dict[str, int]
    line_bytes: int
    misses: dict[str, dict[str, Any]] = field(default_factory=dict)

    def fits(self, level: Level) -> list[str]:
        return [c for c, size in self.caches.items() if level.bytes <= size]

    def table(self) -> pd.DataFrame:
        """One row per loop level: total and per-buffer footprints, and which caches hold it."""
        rows = []
        for lv in self.levels:
            row = {"depth": lv.depth, "loop": lv.loop, "extent": lv.extent, "iterations": lv.iterations,
                   "footprint KiB": lv.bytes / 1024, "lines": lv.lines, "runs": lv.runs,
                   "fits in": ", ".join(self.fits(lv)) or "-",
                   "exact": all(fp.exact for fp in lv.buffers.values())}
            row.update({f"{b} KiB": fp.bytes / 1024 for b, fp in lv.buffers.items()})
            rows.append(row)
        return pd.DataFrame(rows)

    def misses_table(self) -> pd.DataFrame:
        return pd.DataFrame([{"cache": c, **m} for c, m in self.misses.items()])


########## Reading the loop nest ##########

@dataclass
class _Loop:
    var: Any
    name: str
    extent: int
    start: int
    children: list["_Loop"] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)  # of blocks directly under this loop
    work: int = 0  # points of the blocks in its subtree


def _block_accesses(realize: s_tir.SBlockRealize) -> list[Access]:
    block = realize.block
    bind = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    found: list[Access] = []
    inner: list[Any] = []

    def visit(n: Any) -> None:
        if type(n).__name__ in ("BufferLoad", "BufferStore", "TensorLoad", "TensorStore"):  # 0.27 loads are TensorLoad
            buf = n.source if hasattr(n, "source") else n.buffer  # a TensorLoad names its buffer ``source``
            found.append(Access(buf.name, tuple(int(s) for s in buf.shape), tvm.DataType(buf.dtype).bits // 8,
                                tuple(_subst(i, bind) for i in n.indices)))
        elif isinstance(n, s_tir.SBlockRealize):
            inner.append(n)

    visit_nodes(block.body, visit)
    if inner:  # a block around other blocks (a partition's): their accesses are counted as theirs
        return []
    if block.init is not None:
        visit_nodes(block.init, visit)
    return found


def _subst(expr: Any, bind: Mapping[Any, Any]) -> Any:
    """Replace block iteration variables by the loop expressions they are bound to."""
    return _Eval({v: e for v, e in bind.items()}).rewrite(expr)


def _tree(func: tirx.PrimFunc) -> _Loop:
    root = _Loop(None, "(kernel)", 1, 0)

    def on_block(realize: s_tir.SBlockRealize, parent: _Loop) -> _Loop:
        if not realize.same_as(func.body):
            parent.accesses += _block_accesses(realize)
        return parent

    def on_loop(loop: tirx.For, parent: _Loop) -> _Loop:
        lp = _Loop(loop.loop_var, loop.loop_var.name, int(loop.extent), int(loop.min))
        parent.children.append(lp)
        return lp

    walk_nest(func, on_block, on_loop, root)

    def work(lp: _Loop) -> int:
        lp.work = (len(lp.accesses) + sum(work(c) for c in lp.children)) * lp.extent
        return lp.work

    work(root)
    return root


########## Evaluating index expressions on NumPy grids ##########

class _Eval:
    """Integer TIR expressions -> NumPy, and variable substitution."""

    _OPS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "FloorDiv": np.floor_divide,
            "FloorMod": np.mod, "Div": np.floor_divide, "Mod": np.mod, "Min": np.minimum, "Max": np.maximum}

    def __init__(self, env: Mapping[Any, Any], fixed: Mapping[Any, int] | None = None) -> None:
        self.env = env
        self.fixed = fixed or {}  # vars not enumerated: at their loop's first value

    def value(self, e: Any) -> Any:
        kind = type(e).__name__
        if isinstance(e, (int, np.integer)):
            return e
        if kind == "IntImm":
            return int(e.value)
        if kind == "Var":
            return self.env[e] if e in self.env else self.fixed.get(e, 0)
        if kind == "Cast":
            return self.value(e.value)
        if kind in self._OPS:
            return self._OPS[kind](self.value(e.a), self.value(e.b))
        raise ValueError(f"index expression {kind} is not affine arithmetic: {e}")

    def rewrite(self, e: Any) -> Any:
        kind = type(e).__name__
        if kind == "Var":
            return self.env.get(e, e)
        if kind in self._OPS:
            return getattr(tirx, kind)(self.rewrite(e.a), self.rewrite(e.b))
        if kind == "Cast":
            return tirx.Cast(e.dtype, self.rewrite(e.value))
        return e


def _distinct(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sorting: NumPy's hash-based ``unique`` is far slower here)."""
    x = np.sort(x, kind="stable" if x.size < 64 else None)
    return x[np.concatenate(([True], x[1:] != x[:-1]))] if x.size else x


def _vars(e: Any) -> set:
    out: set = set()
    visit_nodes(e, lambda n: out.add(n) if type(n).__name__ == "Var" else None)
    return out


def _group_points(indices: list[Any], free: dict[Any, tuple[int, int]],
                  fixed: Mapping[Any, int]) -> tuple[np.ndarray, bool]:
    """Distinct index tuples of ``indices`` (one group of dims) over the box of ``free`` vars
    (var -> (first value, extent)) they use; the other vars sit at their first value (``fixed``)."""
    used = sorted({v for e in indices for v in _vars(e) if v in free}, key=lambda v: v.name)
    size = math.prod(free[v][1] for v in used)
    if size > _MAX_POINTS:
        return np.empty((0, len(indices)), np.int64), False
    axes = [np.arange(free[v][0], free[v][0] + free[v][1], dtype=np.int64) for v in used]
    grids = np.meshgrid(*axes, indexing="ij") if used else []
    ev = _Eval({v: g.ravel() for v, g in zip(used, grids)}, fixed)
    cols = [np.broadcast_to(np.asarray(ev.value(e), np.int64), (max(size, 1),)) for e in indices]
    return np.stack(cols, axis=1), True


def _addresses(acc: Access, free: dict[Any, tuple[int, int]],
               fixed: Mapping[Any, int]) -> tuple[np.ndarray | None, int, bool]:
    """Distinct element offsets (row-major) one access touches; also their count."""
    dims = list(range(len(acc.indices)))
    uses = [{v for v in _vars(acc.indices[d]) if v in free} for d in dims]
    # dims that share a loop variable form one group (union-find)
    parent = list(dims)

    def find(d: int) -> int:
        while parent[d] != d:
            d = parent[d]
        return d

    for a in dims:
        for b in dims[a + 1:]:
            if uses[a] & uses[b]:
                parent[find(b)] = find(a)
    groups: dict[int, list[int]] = {}
    for d in dims:
        groups.setdefault(find(d), []).append(d)
    strides = [math.prod(acc.shape[d + 1:]) for d in dims]
    parts, count, exact = [], 1, True
    for members in groups.values():
        pts, ok = _group_points([acc.indices[d] for d in members], free, fixed)
        if not ok:
            exact = False
            count *= math.prod(acc.shape[d] for d in members)
            continue
        # an index outside the buffer is never accessed: T.if_then_else (a pad) or T.where guards it
        inside = np.all((pts >= 0) & (pts < np.array([acc.shape[d] for d in members], np.int64)), axis=1)
        part = _distinct(pts[inside] @ np.array([strides[d] for d in members], np.int64))
        count *= len(part)
        parts.append(part)
    if not exact or count > _MAX_POINTS:
        return None, min(count, math.prod(acc.shape)), False
    addr = np.zeros(1, np.int64)
    for p in sorted(parts, key=lambda p: -int(p[0]) if len(p) else 0):  # groups index different dims:
        addr = np.add.outer(addr, p).ravel()                                # the sums are all distinct
    return np.sort(addr), len(addr), True


def _footprints(accs: list[Access], free: dict[Any, tuple[int, int]], fixed: Mapping[Any, int],
                line_bytes: int) -> dict[str, BufferFootprint]:
    by_buf: dict[str, list[Access]] = {}
    for a in accs:
        by_buf.setdefault(a.buffer, []).append(a)
    out = {}
    for name, group in by_buf.items():
        item = group[0].itemsize
        sets, total, exact = [], 0, True
        for a in group:
            addr, n, ok = _addresses(a, free, fixed)
            exact &= ok
            if addr is None:
                total = max(total, n)
            else:
                sets.append(addr)
        if exact:
            addr = _distinct(np.concatenate(sets))
            line_ids = _distinct(addr * item // line_bytes)
            lines = len(line_ids)
            runs = 1 + int(np.count_nonzero(np.diff(line_ids) > 1)) if lines else 0  # runs of adjacent lines
            out[name] = BufferFootprint(len(addr), len(addr) * item, lines, runs)
        else:  # too many points to enumerate: the bound, and a dense layout's lines
            n = max([total] + [len(s) for s in sets])
            out[name] = BufferFootprint(n, n * item, -(-n * item // line_bytes), 1, exact=False)
    return out


########## The profile ##########

def _subtree_accesses(lp: _Loop) -> list[Access]:
    out = list(lp.accesses)
    for c in lp.children:
        out += _subtree_accesses(c)
    return out


def _subtree_vars(lp: _Loop) -> dict[Any, tuple[int, int]]:
    """Loop var -> (first value, extent) of every loop nested inside ``lp``."""
    out: dict[Any, tuple[int, int]] = {}
    for c in lp.children:
        out[c.var] = (c.start, c.extent)
        out.update(_subtree_vars(c))
    return out


def profile_kernel(func: tirx.PrimFunc, caches: "Mapping[str, int] | Ceilings", line_bytes: int | None = None,
                   name: str = "kernel") -> Profile:
    """Footprints along the kernel's main loop chain (outermost first, following the loop with
    most work) and the estimated misses per cache.

    ``caches``: cache name -> bytes (``{"L1d": 49152, ...}``), or a ``Ceilings`` (its caches and
    line size). ``line_bytes`` defaults to the ceilings' line, else 64.

    The model ranks layouts and tilings as the paper's measurements do (inner levels that fit L1
    and contiguous tiles need fewer misses), but counts capacity and compulsory misses only:
    associativity conflicts, sharing between cores and the reuse between iterations of the
    fitting level are left out, and the first-iteration footprints can under- or over-count a
    boundary tile (a pad's first row reads no input).
    """
    if hasattr(caches, "caches"):  # a Ceilings: take the measured machine's caches and line
        line_bytes = line_bytes or caches.line_bytes
        caches = caches.caches
    line_bytes = line_bytes or 64
    root = _tree(func)
    fixed = {v: first for v, (first, _) in _subtree_vars(root).items()}
    memo: dict[tuple[int, bool], dict[str, BufferFootprint]] = {}

    def footprint(lp: _Loop, own: bool) -> dict[str, BufferFootprint]:
        """One iteration of ``lp``: its whole subtree, or (``own``) its direct blocks only."""
        key = (id(lp), own)
        if key not in memo:
            memo[key] = (_footprints(lp.accesses, {}, fixed, line_bytes) if own else
                         _footprints(_subtree_accesses(lp), _subtree_vars(lp), fixed, line_bytes))
        return memo[key]

    levels, lp, iters, depth = [], root, 1, 0
    while True:
        iters *= lp.extent if lp is not root else 1
        levels.append(Level(depth, lp.name, lp.extent, iters, footprint(lp, False)))
        if not lp.children:
            break
        lp, depth = max(lp.children, key=lambda c: c.work), depth + 1
    estimates = {cache: _misses(root, size, footprint) for cache, size in caches.items()}
    misses = {}
    for cache, (lines, runs, bound) in _bounded(caches, estimates, levels[0]).items():
        # footprints only shrink inward: the first level that fits is the outermost one
        fit = next((lv for lv in levels if lv.bytes <= caches[cache]), levels[-1])
        misses[cache] = {"size KiB": caches[cache] // 1024, "outermost level that fits": fit.loop,
                         "footprint KiB": fit.bytes / 1024, "iterations": fit.iterations,
                         "misses (lines)": lines, "misses (prefetch-aware)": runs, "bounded by": bound}
    return Profile(name, levels, dict(caches), line_bytes, misses)


def _misses(lp: _Loop, size: int, footprint: Callable[[_Loop, bool], dict[str, BufferFootprint]],
            iterations: int = 1) -> tuple[int, int]:
    """Estimated misses (lines, runs) in a cache of ``size`` bytes of the ``iterations`` runs of
    one iteration of ``lp``: its footprint once each when that fits, else its children's misses
    and those of the blocks directly inside it (per iteration, nothing free). So every loop of
    the tree counts, a fused pad's or bias's nest too; reuse across iterations of the fitting
    level is what the next level out would capture, had it fitted. Runs, not lines: a hardware
    prefetcher streams the rest of a contiguous run, so a contiguous tile (ALT's tiled layouts)
    costs one demand miss where the same tile strided across a plane costs one per line."""
    fp = footprint(lp, False)
    if sum(b.bytes for b in fp.values()) <= size:
        return iterations * sum(b.lines for b in fp.values()), iterations * sum(b.runs for b in fp.values())
    own = footprint(lp, True)
    lines, runs = iterations * sum(b.lines for b in own.values()), iterations * sum(b.runs for b in own.values())
    for c in lp.children:
        cl, cr = _misses(c, size, footprint, iterations * c.extent)
        lines, runs = lines + cl, runs + cr
    return lines, runs


def _bounded(caches: Mapping[str, int], estimates: Mapping[str, tuple[int, int]],
             kernel: Level) -> dict[str, tuple[int, int, str]]:
    """Each cache's (lines, runs) estimate raised to the compulsory misses (``kernel``'s distinct
    lines and runs, each brought in once), then, smallest cache first, lowered to the next
    smaller cache's (inclusion: whatever fits the smaller fits the larger); with the bound that
    changed it ("" for none). First-iteration footprints can break either bound (a tile that
    straddles a line boundary only in later iterations)."""
    out: dict[str, tuple[int, int, str]] = {}
    smaller: tuple[int, int, str] | None = None
    for cache in sorted(caches, key=lambda c: caches[c]):
        lines, runs = estimates[cache]
        bound = "compulsory misses" if lines < kernel.lines or runs < kernel.runs else ""
        lines, runs = max(lines, kernel.lines), max(runs, kernel.runs)
        if smaller is not None and (lines > smaller[0] or runs > smaller[1]):
            bound = f"inclusion ({smaller[2]})"
            lines, runs = min(lines, smaller[0]), min(runs, smaller[1])
        out[cache] = (lines, runs, bound)
        smaller = (lines, runs, cache)
    return {c: out[c] for c in caches}


def accesses(func: tirx.PrimFunc) -> list[Access]:
    """Every buffer access of the kernel's blocks (for inspection and tests)."""
    return _subtree_accesses(_tree(func))
