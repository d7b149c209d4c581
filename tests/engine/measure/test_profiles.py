"""Profiles: FLOP counts against closed forms, the footprint model on hand-checked loop nests,
the roofline's bounds, the machine ceilings and their cache, and the perf fallback."""

from __future__ import annotations

import json
import math

import pytest
import tvm
from tvm import te
from tvm.script import tirx as T

from workbench.engine.measure import ceilings as ceil_mod
from workbench.engine.measure.ceilings import Ceilings, format_ceilings, get_ceilings
from workbench.engine.build.targets import resolve_target
from workbench.engine.measure.counters import kernel_counters, perf_counters, perf_unavailable
from workbench.engine.measure.footprint import profile_kernel
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.build.program import make_program
from workbench.engine.measure.roofline import RooflinePoint, compulsory_bytes, kernel_point, reference_points
from workbench.viz.cache import footprint_figure, misses_figure
from workbench.viz.roofline import roofline_figure

KIB = 1024


def _conv_graph(nd: int, n: int, cin: int, size: int, cout: int, k: int, **attrs):
    b = GraphBuilder("t")
    x = b.input("data", (n, cin, *(size,) * nd))
    w = b.const("op.weight", (cout, cin // attrs.get("groups", 1), *(k,) * nd))
    b.op("op", f"conv{nd}d", x, w, **attrs)
    return b.build()


def _tconv_graph(nd: int, n: int, cin: int, size: int, cout: int, k: int, **attrs):
    b = GraphBuilder("t")
    x = b.input("data", (n, cin, *(size,) * nd))
    b.op("op", f"conv_transpose{nd}d", x, b.const("op.weight", (cin, cout, *(k,) * nd)), **attrs)
    return b.build()


def _out(size: int, k: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


CASES = {  # name -> (graph, closed-form FLOPs: 2 per multiply-add)
    "C1D": (lambda: _conv_graph(1, 2, 16, 50, 32, 3, padding=1), 2 * 2 * 32 * 50 * 16 * 3),
    "C2D": (lambda: _conv_graph(2, 1, 3, 230, 64, 7, stride=2), 2 * 64 * _out(230, 7, 2) ** 2 * 3 * 49),
    "DEP": (lambda: _conv_graph(2, 1, 32, 14, 32, 3, padding=1, groups=32, depthwise=True), 2 * 32 * 14 * 14 * 9),
    "GRP": (lambda: _conv_graph(2, 1, 32, 14, 64, 3, padding=1, groups=4), 2 * 64 * 14 * 14 * (32 // 4) * 9),
    "DIL": (lambda: _conv_graph(2, 1, 8, 20, 16, 3, padding=2, dilation=2), 2 * 16 * _out(20, 3, 1, 2, 2) ** 2 * 8 * 9),
    "C3D": (lambda: _conv_graph(3, 1, 4, 8, 8, 3, padding=1), 2 * 8 * 8 ** 3 * 4 * 27),
    "T2D": (lambda: _tconv_graph(2, 1, 16, 8, 8, 4, stride=2, padding=1), 2 * 16 * 8 * 8 * 8 * 16),
    "T3D": (lambda: _tconv_graph(3, 1, 8, 4, 4, 4, stride=2, padding=1), 2 * 8 * 4 ** 3 * 4 * 64),
}


def _gmm(batch: tuple, m: int, k: int, n: int):
    b = GraphBuilder("g")
    a = b.input("a", (*batch, m, k))
    b.op("op", "matmul", a, b.const("op.weight", (k, n)) if not batch else b.input("b", (*batch, k, n)))
    return b.build()


CASES["GMM"] = (lambda: _gmm((), 64, 32, 48), 2 * 64 * 32 * 48)
CASES["BMM"] = (lambda: _gmm((3,), 16, 8, 24), 2 * 3 * 16 * 8 * 24)


@pytest.mark.parametrize("name", sorted(CASES))
def test_flops_equal_the_closed_form(name):
    build, expected = CASES[name]
    graph = build()
    assert graph.node("op").kind == "complex"
    assert graph.flops("op") == expected


def _tiled_gmm(m=64, n=64, k=64, ti=16, tj=16, tk=8):
    a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b, c]))
    i, j, kk = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, ti])
    jo, ji = sch.split(j, [None, tj])
    ko, ki = sch.split(kk, [None, tk])
    sch.reorder(io, jo, ko, ii, ki, ji)
    return sch.mod["main"]


def test_footprint_of_a_tiled_gmm_is_exact():
    prof = profile_kernel(_tiled_gmm(), {"L1d": 8 * KIB, "L2": 64 * KIB}, 64, "gmm")
    by = {lv.loop: {b: fp.bytes for b, fp in lv.buffers.items()} for lv in prof.levels}
    f = 4  # float32
    assert by["(kernel)"] == {"A": 64 * 64 * f, "B": 64 * 64 * f, "C": 64 * 64 * f}
    assert by["i_0"] == {"A": 16 * 64 * f, "B": 64 * 64 * f, "C": 16 * 64 * f}  # a row band of A and C, all of B
    assert by["j_0"] == {"A": 16 * 64 * f, "B": 64 * 16 * f, "C": 16 * 16 * f}
    assert by["k_0"] == {"A": 16 * 8 * f, "B": 8 * 16 * f, "C": 16 * 16 * f}
    assert by["i_1"] == {"A": 8 * f, "B": 8 * 16 * f, "C": 16 * f}
    assert by["j_1"] == {"A": f, "B": f, "C": f}
    assert [lv.iterations for lv in prof.levels] == [1, 4, 16, 128, 2048, 16384, 262144]
    j0 = next(lv for lv in prof.levels if lv.loop == "j_0")
    # A's 16 full rows are one contiguous run; B's 64 rows of 16 floats are 64 separate lines;
    # C's 16 rows of 16 floats: 16 lines, 16 runs
    assert (j0.buffers["A"].lines, j0.buffers["A"].runs) == (16 * 64 * f // 64, 1)
    assert (j0.buffers["B"].lines, j0.buffers["B"].runs) == (64, 64)
    assert (j0.buffers["C"].lines, j0.buffers["C"].runs) == (16, 16)
    # 48 KiB in all: fits L2 (64 KiB) at once; in L1 (8 KiB) first from j_0 (9 KiB) inward: k_0 (2 KiB)
    assert prof.misses["L2"]["outermost level that fits"] == "(kernel)"
    assert prof.misses["L2"]["misses (lines)"] == 3 * 64 * 64 * f // 64
    assert prof.misses["L1d"]["outermost level that fits"] == "k_0"
    k0 = next(lv for lv in prof.levels if lv.loop == "k_0")
    assert prof.misses["L1d"]["misses (lines)"] == 128 * k0.lines


def test_contiguous_tiles_need_fewer_runs_than_strided_ones():
    """ALT's Table 2 argument: the same 16x16 tile, stored contiguously vs strided in a plane."""
    def copy(layout: str):
        src = te.placeholder((64, 64) if layout == "plane" else (16, 16, 16), name="S")
        if layout == "plane":  # tile t = rows 0..15, columns 16t..16t+15 of a 64-wide plane
            out = te.compute((4, 16, 16), lambda t, r, c: src[r, t * 16 + c], name="O")
        else:
            out = te.compute((4, 16, 16), lambda t, r, c: src[t, r, c], name="O")
        return te.create_prim_func([src, out])

    strided = profile_kernel(copy("plane"), {"L1d": 32 * KIB}, 64, "plane").levels[1].buffers["S"]
    blocked = profile_kernel(copy("tiles"), {"L1d": 32 * KIB}, 64, "tiles").levels[1].buffers["S"]
    assert strided.bytes == blocked.bytes == 16 * 16 * 4
    assert (blocked.lines, blocked.runs) == (16, 1)
    assert (strided.lines, strided.runs) == (16, 16)


def test_loops_are_enumerated_from_their_first_value():
    """``for i in range(60, 64)``: rows 0..3 read twice (as i - 60 and as 63 - i) are 4 rows, not 8."""

    @T.prim_func(s_tir=True)
    def shifted(a: T.Buffer((64, 64), "float32"), b: T.Buffer((4, 64), "float32")):
        for i in T.serial(60, 64):
            for j in range(64):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    b[vi - 60, vj] = a[vi - 60, vj] + a[63 - vi, vj]

    prof = profile_kernel(shifted, {"L1d": 32 * KIB}, 64, "shifted")
    top = prof.levels[0].buffers
    assert (top["a"].bytes, top["a"].lines, top["a"].runs) == (4 * 64 * 4, 16, 1)
    assert top["b"].bytes == 4 * 64 * 4 and all(fp.exact for fp in top.values())


def test_profile_kernel_takes_the_ceilings():
    func = _tiled_gmm()
    a, b = profile_kernel(func, FAKE, name="gmm"), profile_kernel(func, FAKE.caches, FAKE.line_bytes, "gmm")
    assert a == b and set(a.misses) == set(FAKE.caches)
    table = a.table()
    assert list(table["loop"]) == ["(kernel)", "i_0", "j_0", "k_0", "i_1", "k_1", "j_1"]
    assert table["exact"].all() and {"A KiB", "B KiB", "C KiB"} <= set(table.columns)


FAKE = Ceilings("test cpu", {"kind": "llvm"}, peak_gflops=100.0, copy_gbs=10.0, triad_gbs=12.0,
                caches={"L1d": 32 * KIB, "L2": KIB * KIB}, line_bytes=64)


def test_roofline_bounds_an_elementwise_kernel_by_bandwidth_and_a_large_gmm_by_compute():
    relu_graph = GraphBuilder("r")
    x = relu_graph.input("data", (1, 64, 56, 56))
    relu_graph.op("relu", "relu", x)
    prog = make_program(relu_graph.build())
    relu = kernel_point("relu", prog.funcs["relu"], prog.flops["relu"], latency_ms=0.5)
    assert compulsory_bytes(prog.funcs["relu"]) == 2 * 64 * 56 * 56 * 4
    assert relu.intensity == pytest.approx(1 / 8)
    assert relu.bound(FAKE) == "memory" and relu.attainable(FAKE) == pytest.approx(12.0 / 8)

    gmm = make_program(_gmm((), 1024, 1024, 1024))
    big = kernel_point("gmm", gmm.funcs["op"], gmm.flops["op"], latency_ms=30.0)
    assert big.intensity == pytest.approx(2 * 1024 ** 3 / (3 * 1024 * 1024 * 4))
    assert big.bound(FAKE) == "compute" and big.attainable(FAKE) == 100.0
    assert big.percent_of_roof(FAKE) == pytest.approx(100 * 2 * 1024 ** 3 / 30e6 / 100.0)
    fig = roofline_figure([relu, big], FAKE)
    assert [t.name for t in fig.data][-2:] == ["relu", "gmm"]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_library_gemms_are_reference_points_on_the_roofline():
    yard = ceil_mod.Yardstick("PyTorch", 2048, 169.0, 2)
    c = Ceilings(**{**FAKE.to_json(), "library": (yard,)})
    (ref,) = reference_points(c)
    assert (ref.kernel, ref.variant, ref.flops, ref.bytes) == ("PyTorch GEMM 2048", "library", 2 * 2048 ** 3,
                                                               3 * 2048 * 2048 * 4)
    assert ref.gflops == pytest.approx(169.0) and ref.intensity == pytest.approx(2048 / 6)
    assert ref.bound(c) == "compute" and ref.percent_of_roof(c) == pytest.approx(169.0)  # above the measured roof
    assert reference_points(FAKE) == []


@pytest.mark.slow
def test_ceilings_are_measured_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALT_WORKBENCH_CACHE", str(tmp_path))
    target = {"kind": "llvm", "num-cores": 2}
    c = get_ceilings(target)
    assert c.peak_gflops > 1.0 and c.copy_gbs > 0.5 and c.triad_gbs > 0.5
    assert c.caches.get("L1d", 0) > 0 and c.line_bytes in (32, 64, 128, 256)
    assert c.lanes > 0 and c.accumulators > 0 and c.cores == 2 and c.fma_ports == 2
    assert {y.library for y in c.library} >= {"NumPy"} and all(y.gflops > 0 for y in c.library)
    text = format_ceilings(c)
    assert "peak (FMA kernel)" in text and "peak (theoretical)" in text and "NumPy GEMM" in text

    def boom(_):
        raise AssertionError("measured again")

    monkeypatch.setattr(ceil_mod, "measure_ceilings", boom)
    assert get_ceilings(target) == c  # from the cache file
    assert get_ceilings(resolve_target(target)) == c  # the target as built (mcpu: this CPU) shares it
    with pytest.raises(AssertionError, match="measured again"):
        get_ceilings(target, refresh=True)


def test_cache_sizes_fall_back_to_defaults_when_the_os_does_not_tell(tmp_path):
    caches, line, note = ceil_mod.cache_info(tmp_path / "nothing", getconf=False)
    assert caches == ceil_mod.DEFAULT_CACHES and line == 64 and "defaults" in note
    caches, line, note = ceil_mod.cache_info(tmp_path / "nothing")  # getconf, where glibc knows
    assert caches.get("L1d", 0) > 0 and line > 0 and ("getconf" in note or "defaults" in note)


def test_cache_sizes_are_read_from_sysfs(tmp_path):
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
                                             (3, "Unified", "32M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, text in [("level", level), ("type", kind), ("size", size), ("coherency_line_size", 64)]:
            (d / name).write_text(f"{text}\n")
    assert ceil_mod.cache_info(tmp_path) == ({"L1d": 48 * KIB, "L2": 2 * KIB * KIB, "L3": 32 * KIB * KIB}, 64, "")


def test_ceilings_round_trip_through_json():
    assert Ceilings.from_json(json.loads(json.dumps(FAKE.to_json()))) == FAKE
    assert FAKE.bandwidth_gbs == 12.0 and FAKE.ridge == pytest.approx(100 / 12)


def test_perf_counters_give_numbers_or_a_reason():
    graph = _gmm((), 32, 32, 32)
    built = make_program(graph).build({"kind": "llvm", "num-cores": 2})
    got = kernel_counters(built, "op", calls=5)
    if got.available:
        assert got.per_call["instructions"] > 0 and not got.reason
    else:
        assert got.reason == perf_unavailable() and len(got.reason) > 10 and not got.per_call
    assert perf_counters(built, "op", calls=5) == got
    bad = perf_counters(built, "no_such_kernel", calls=5)  # never raises: a reason instead
    assert not bad.available and bad.reason and not bad.per_call


def test_cache_figures_show_every_buffer_and_variant():
    prof = profile_kernel(_tiled_gmm(), {"L1d": 8 * KIB, "L2": 64 * KIB}, 64, "gmm")
    fig = footprint_figure(prof)
    assert {t.name for t in fig.data} == {"A", "B", "C", "total", "L1d 8 KiB", "L2 64 KiB"}  # a line per cache
    other = profile_kernel(_tiled_gmm(ti=8, tj=8, tk=8), {"L1d": 8 * KIB, "L2": 64 * KIB}, 64, "gmm")
    bars = misses_figure({"16x16x8": prof, "8x8x8": other})
    assert [t.name for t in bars.data] == ["16x16x8", "8x8x8"] and len(bars.data[0].y) == 4
    assert math.isclose(bars.data[0].y[0], prof.misses["L1d"]["misses (lines)"])


@pytest.mark.parametrize("flops, nbytes, latency_ms, cache, note", [
    (0, 16 * KIB, 0.001, "L1d", "its 16 KiB of buffers fit L1d (32 KiB)"),          # 16 GB/s copy, data in L1d
    (10**5, 512 * KIB, 0.01, "L2", "fit L2 (1024 KiB)"),                          # 52 GB/s, memory-bound
    (0, 64 * KIB * KIB, 1.0, None, "larger than every cache"),                    # 67 GB/s out of DRAM
    (10**9, KIB, 1.0, "L1d", "above the measured FMA peak"),                      # 1000 GFLOP/s, compute-bound
    (0, 64 * KIB * KIB, 100.0, None, ""),                                         # 0.7 GB/s: under the roof
])
def test_a_kernel_above_its_roof_is_explained(flops, nbytes, latency_ms, cache, note):
    p = RooflinePoint("k", "v", flops, nbytes, latency_ms)
    assert p.holding_cache(FAKE) == cache
    assert (p.percent_of_roof(FAKE) > 100) == bool(note)
    assert note in p.roof_note(FAKE) and bool(p.roof_note(FAKE)) == bool(note)
    assert p.row(FAKE)["note"] == p.roof_note(FAKE) and p.row(FAKE)["buffers fit"] == (cache or "DRAM only")
