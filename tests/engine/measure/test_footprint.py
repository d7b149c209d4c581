"""The cache model's bounds, as properties over random loop nests: misses never fall below the
compulsory misses (every distinct line touched, counted independently here) and a larger cache
never misses more than a smaller one; and a kernel of several loop nests is counted nest by nest."""

from __future__ import annotations

import math

import tvm
from hypothesis import given, settings, strategies as st
from tvm import te
from tvm.s_tir.schedule import ScheduleError

from workbench.engine.measure.footprint import BufferFootprint, Level, _bounded, profile_kernel

_F32 = 4


########## Random kernels: one to three stages, each its own loop nest, fully touching every buffer ##########

def _stage(kind: str, x: te.Tensor, k: int, i: int) -> te.Tensor:
    n, m = (int(s) for s in x.shape)
    name = f"s{i}"
    if kind == "scale":
        return te.compute((n, m), lambda a, b: x[a, b] * 2.0, name=name)
    if kind == "transpose":
        return te.compute((m, n), lambda a, b: x[b, a], name=name)
    if kind == "pad":  # reads every element of x once, writes a border of zeros around it
        return te.compute((n + 2, m + 2), lambda a, b: tvm.tirx.if_then_else(
            tvm.tirx.all(a >= 1, a <= n, b >= 1, b <= m), x[a - 1, b - 1], 0.0), name=name)
    if kind == "matmul":  # x @ w, w a fresh (m, k) input
        w = te.placeholder((m, k), name=f"w{i}")
        r = te.reduce_axis((0, m), name=f"r{i}")
        return te.compute((n, k), lambda a, b: te.sum(x[a, r] * w[r, b], axis=r), name=name)
    raise ValueError(kind)


_KINDS = ("scale", "transpose", "pad", "matmul")


@st.composite
def kernels(draw: st.DrawFn) -> tvm.tirx.PrimFunc:
    """A random chain of stages over 2-D buffers; random divisible splits and a reorder of the
    last stage's loops; maybe the stage before it computed at one of them."""
    dims = st.sampled_from([2, 3, 4, 6, 8, 12, 16])
    x = te.placeholder((draw(dims), draw(dims)), name="x")
    tensors, out = [x], x
    for i, kind in enumerate(draw(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=3))):
        out = _stage(kind, out, draw(dims), i)
        tensors += [t for t in out.op.input_tensors if t not in tensors and isinstance(t.op, te.PlaceholderOp)]
        tensors.append(out)
    args = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)] + [out]
    sch = tvm.s_tir.Schedule(te.create_prim_func(args))
    block = sch.get_sblock(out.op.name)
    for loop in list(sch.get_loops(block)):
        extent = int(sch.get(loop).extent)
        factor = draw(st.sampled_from([f for f in (1, 2, 3, 4) if extent % f == 0]))
        if factor > 1:
            sch.split(loop, [None, factor])
    spatial = [lp for lp in sch.get_loops(block) if not sch.get(lp).loop_var.name.startswith("r")]
    sch.reorder(*draw(st.permutations(spatial)))  # spatial loops only (reductions are named r*)
    producers = list(sch.get_producers(block))
    if producers and draw(st.booleans()):  # the stage before inside a loop of the last: a loop that holds
        loops = sch.get_loops(block)       # a nest and a block beside each other
        try:
            sch.compute_at(producers[0], loops[draw(st.integers(0, len(loops) - 1))])
        except ScheduleError:  # not every loop can hold it: the nests stay apart
            pass
    return sch.mod["main"]


def _distinct_lines(func: tvm.tirx.PrimFunc, line: int) -> tuple[int, int]:
    """Lines and runs every buffer of ``func`` occupies: each is touched whole by construction
    (every element read or written) and starts on a line boundary, so it is ceil(bytes / line)
    lines in one run."""
    buffers = [*func.params, *func.body.block.alloc_buffers]  # arguments, then the root's intermediates
    sizes = [math.prod(int(s) for s in b.shape) * _F32 for b in buffers]
    return sum(-(-n // line) for n in sizes), len(sizes)


caches = st.lists(st.integers(64, 64 * 1024), min_size=1, max_size=4, unique=True).map(
    lambda sizes: {f"C{i}": s for i, s in enumerate(sorted(sizes))})


@settings(max_examples=60)
@given(kernels(), caches, st.sampled_from([16, 32, 64, 128]))
def test_misses_respect_compulsory_misses_and_inclusion(func, sizes, line):
    prof = profile_kernel(func, sizes, line, "k")
    lines, runs = _distinct_lines(func, line)
    assert (prof.levels[0].lines, prof.levels[0].runs) == (lines, runs)  # the compulsory count is right
    ordered = [prof.misses[c] for c in sorted(sizes, key=sizes.get)]
    for m in ordered:
        assert m["misses (lines)"] >= lines and m["misses (prefetch-aware)"] >= runs
        assert m["misses (prefetch-aware)"] <= m["misses (lines)"]
    for small, large in zip(ordered, ordered[1:]):
        assert large["misses (lines)"] <= small["misses (lines)"]
        assert large["misses (prefetch-aware)"] <= small["misses (prefetch-aware)"]
    whole = sum(fp.bytes for fp in prof.levels[0].buffers.values())
    for c, size in sizes.items():  # a cache that holds the whole kernel misses each line once
        if whole <= size:
            assert (prof.misses[c]["misses (lines)"], prof.misses[c]["bounded by"]) == (lines, "")


########## Hand-checked: a kernel of two loop nests ##########

def test_every_nest_of_a_kernel_is_counted_not_only_the_main_one():
    """``p = 2 x`` then ``y = 2 p``, rows of 16 floats (one 64 B line): a 256 B cache holds one
    row of a nest's two buffers (2 lines), not a nest, so each nest misses 2 lines per row.
    Counting the main nest alone would give 2n, below the 3n lines the kernel touches."""
    n = 8
    x = te.placeholder((n, 16), name="x")
    y = _stage("scale", _stage("scale", x, 0, 0), 0, 1)
    prof = profile_kernel(te.create_prim_func([x, y]), {"C": 256}, 64, "k")
    assert prof.levels[0].lines == 3 * n and prof.misses["C"]["outermost level that fits"] == "a"
    assert prof.misses["C"]["misses (lines)"] == prof.misses["C"]["misses (prefetch-aware)"] == 2 * n * 2
    assert prof.misses["C"]["bounded by"] == ""  # the estimate itself, no bound needed


def test_a_pads_first_row_reads_no_input_so_the_compulsory_misses_bound_the_estimate():
    """The row loop's first iteration writes the zero border and reads nothing of ``x`` (its
    guarded read is out of bounds), so rows x first-row lines (10 x 3) misses ``x`` altogether;
    the table shows the compulsory misses instead, and says so."""
    n, m, line = 8, 32, 64
    x = te.placeholder((n, m), name="x")
    prof = profile_kernel(te.create_prim_func([x, _stage("pad", x, 0, 0)]), {"C": 256}, line, "pad")
    compulsory = -(-n * m * _F32 // line) + -(-(n + 2) * (m + 2) * _F32 // line)
    first_row = -(-(m + 2) * _F32 // line)
    assert prof.levels[1].buffers["x"].lines == 0 and (n + 2) * first_row < compulsory
    assert (prof.misses["C"]["misses (lines)"], prof.misses["C"]["bounded by"]) == (compulsory, "compulsory misses")


def test_bounds_raise_an_estimate_to_the_compulsory_misses_then_lower_it_to_a_smaller_caches():
    kernel = Level(0, "(kernel)", 1, 1, {"x": BufferFootprint(6 * 16, 6 * 64, 6, 2)})
    got = _bounded({"L2": 1 << 20, "L1d": 1 << 15, "L3": 1 << 25},
                   {"L1d": (5, 3), "L2": (9, 4), "L3": (7, 2)}, kernel)
    assert list(got) == ["L2", "L1d", "L3"]  # the caller's order
    assert got == {"L1d": (6, 3, "compulsory misses"), "L2": (6, 3, "inclusion (L1d)"), "L3": (6, 2, "inclusion (L2)")}


def test_a_partitioned_loop_counts_each_access_once():
    """``loop_partition`` leaves a block around the pieces it cuts: the pieces' accesses are
    theirs, not that block's too (each of the 3 pieces reads ``x`` and writes the pad once)."""
    from workbench.engine.measure.footprint import accesses
    from workbench.engine.loops.primitives import apply_steps, loop_step

    x = te.placeholder((6, 20), name="x")
    func = te.create_prim_func([x, _stage("pad", x, 0, 0)])
    cut = apply_steps(func, [loop_step("loop_partition", "k", block="s0", loop="b", factors=[1, 20, 1])]).mod["main"]
    assert len(accesses(cut)) == 3 * len(accesses(func)) == 3 * 2  # each piece reads x and writes s0
