"""Our TIR pipeline (``codegen``): ``MergeStridedStores`` writes ``k`` interleaved strided vector
stores as one dense store of a shuffle, changes no result, and leaves alone the stores it cannot
prove to be one dense run or whose values read the buffer they write."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from workbench.engine.build import codegen
from workbench.engine.build.targets import target_from, vector_unit

HOST = {"kind": "llvm", "num-cores": 2}


def _interleave(channels: int, step: int, lanes: int = 16):
    """b[w * step + c] = a[c, w]: ``channels`` planes into rows ``step`` apart (dense when equal)."""

    @T.prim_func(s_tir=True)
    def f(a: T.Buffer((channels, lanes), "float32"), b: T.Buffer((lanes * step,), "float32")):
        for c in T.unroll(channels):
            for w in T.vectorized(lanes):
                with T.sblock("b"):
                    vc, vw = T.axis.remap("SS", [c, w])
                    b[vw * step + vc] = a[vc, vw]

    return f


@T.prim_func(s_tir=True)
def _in_place(b: T.Buffer((48,), "float32")):
    for c in T.unroll(3):
        for w in T.vectorized(16):
            with T.sblock("b"):
                vc, vw = T.axis.remap("SS", [c, w])
                b[vw * 3 + vc] = b[vw * 3 + vc] * T.float32(2.0)


def _run(func, pipeline: str, args: list[np.ndarray]) -> list[np.ndarray]:
    fn = tvm.compile(tvm.IRModule({"main": func}), target=target_from(HOST), tir_pipeline=pipeline).jit()["main"]
    tensors = [tvm.runtime.tensor(x) for x in args]
    fn(*tensors)
    return [t.numpy() for t in tensors]


def _random(func, rng):
    return [rng.random([int(n) for n in p.shape], dtype=np.float32) for p in func.params]


@pytest.mark.parametrize("channels, lanes", [(2, 8), (3, 16), (4, 4)])
def test_interleaved_stores_become_one_dense_store_with_the_same_result(channels, lanes):
    func = _interleave(channels, channels, lanes)
    text = codegen.lowered(func).script()
    assert text.count("T.Shuffle") == 1
    assert f", {channels}, {lanes})" not in text and f":{channels}]" not in text  # no strided store left
    rng = np.random.default_rng(channels)
    args = _random(func, rng)
    ours, tvms = _run(func, codegen.PIPELINE, args), _run(func, "s_tir", args)
    np.testing.assert_array_equal(ours[1], tvms[1])
    np.testing.assert_array_equal(ours[1].reshape(lanes, channels).T, args[0])


@pytest.mark.parametrize("func, step", [(_interleave(3, 4), 4), (_in_place, 3)],
                         ids=["gaps between rows", "reads what it writes"])
def test_stores_that_are_not_one_dense_run_of_other_values_stay(func, step):
    text = codegen.lowered(func).script()
    assert text.count(f":{step}] = ") == 3  # three strided stores, none merged
    args = _random(func, np.random.default_rng(1))
    np.testing.assert_array_equal(_run(func, codegen.PIPELINE, args)[-1], _run(func, "s_tir", args)[-1])


def test_more_stores_than_a_few_permutes_stay():
    assert "T.Shuffle" not in codegen.lowered(_interleave(5, 5, 8)).script()


def test_compile_builds_through_the_pipeline_for_avx512():
    """Built for AVX-512 (build only: any x86 host), the 3 x 16 interleave is register permutes
    and dense stores, not 48 scalar stores."""
    asm = codegen.compile(tvm.IRModule({"main": _interleave(3, 3)}), {"kind": "llvm", "mcpu": "skylake-avx512"})
    text = asm.mod.inspect_source("asm")
    assert "vpermt2ps" in text or "vpermi2ps" in text
    assert text.count("vextractps") < 8  # TVM alone: 36, a lane at a time


@T.prim_func
def _with_binding(a: T.Buffer((48,), "float32"), b: T.Buffer((48,), "float32")):
    b[0:48:3] = a[T.Ramp(0, 1, 16)]
    v: T.let[T.int32] = 16
    b[1:49:3] = a[T.Ramp(v, 1, 16)]
    b[2:50:3] = a[T.Ramp(32, 1, 16)]


@T.prim_func
def _binding_reads_the_run(a: T.Buffer((48,), "float32"), b: T.Buffer((48,), "float32")):
    b[0:48:3] = a[T.Ramp(0, 1, 16)]
    v: T.let[T.float32] = b[0]
    b[1:49:3] = a[T.Ramp(16, 1, 16)] + T.Broadcast(v, 16)
    b[2:50:3] = a[T.Ramp(32, 1, 16)]


def test_bindings_between_the_stores_move_before_the_merged_store():
    """TVM's common-subexpression pass binds an index between the stores; the binding goes first
    and the run is still one store. A binding that reads what the first store wrote keeps the
    stores apart (moved later, it would read the old value)."""
    merged = codegen.merge_strided_stores(_with_binding).script()
    assert merged.index("v: T.let") < merged.index("b[0:48] = T.Shuffle")
    assert "T.Shuffle" not in codegen.merge_strided_stores(_binding_reads_the_run).script()
    args = _random(_with_binding, np.random.default_rng(2))
    out = _run(_with_binding, codegen.PIPELINE, args)[1]
    np.testing.assert_array_equal(out.reshape(16, 3).T, args[0].reshape(3, 16))


@T.prim_func
def _through_a_view(a: T.Buffer((48,), "float32"), b: T.Buffer((48,), "float32")):
    view = T.decl_buffer((48,), "float32", data=b.data)
    b[0:48:3] = a[T.Ramp(0, 1, 16)]
    b[1:49:3] = T.Broadcast(view[0], 16)
    b[2:50:3] = a[T.Ramp(32, 1, 16)]


@T.prim_func
def _through_a_call(a: T.Buffer((48,), "float32"), b: T.Buffer((48,), "float32")):
    b[0:48:3] = a[T.Ramp(0, 1, 16)]
    b[1:49:3] = T.Broadcast(T.call_extern("float32", "peek", a.data), 16)
    b[2:50:3] = a[T.Ramp(32, 1, 16)]


@T.prim_func
def _bound_base(a: T.Buffer((96,), "float32"), b: T.Buffer((96,), "float32"), n: T.int32):
    b[T.Ramp(n, 3, 16)] = a[T.Ramp(0, 1, 16)]
    v: T.let[T.int32] = n + 1
    b[T.Ramp(v, 3, 16)] = a[T.Ramp(16, 1, 16)]
    b[T.Ramp(n + 2, 3, 16)] = a[T.Ramp(32, 1, 16)]


def test_values_that_read_the_storage_through_a_view_or_call_anything_keep_their_stores():
    """A buffer declared over the run's data is the same memory (read before the first store
    wrote it, the merged run would change the result); a call may have side effects."""
    assert "T.Shuffle" not in codegen.merge_strided_stores(_through_a_view).script()
    assert "T.Shuffle" not in codegen.merge_strided_stores(_through_a_call).script()
    args = [np.arange(48, dtype=np.float32) + 100, np.full(48, -1, dtype=np.float32)]
    np.testing.assert_array_equal(_run(_through_a_view, codegen.PIPELINE, args)[1],
                                  _run(_through_a_view, "s_tir", args)[1])


def test_a_base_bound_between_the_stores_is_known():
    assert "b[n:n + 48] = T.Shuffle" in codegen.merge_strided_stores(_bound_base).script()


def _every_other(step: int, lanes: int = 16, scope: str = "global"):
    """b[w] = a[w * step] + a[w * step + 1], through a buffer of ``scope``."""

    @T.prim_func(s_tir=True)
    def f(a: T.Buffer((lanes * step + 1,), "float32"), b: T.Buffer((lanes,), "float32")):
        tile = T.sblock_alloc_buffer((lanes * step + 1,), "float32", scope=scope)
        for i in range(lanes * step + 1):
            with T.sblock("tile"):
                vi = T.axis.remap("S", [i])
                tile[vi] = a[vi]
        for w in T.vectorized(lanes):
            with T.sblock("b"):
                vw = T.axis.remap("S", [w])
                b[vw] = tile[vw * step] + tile[vw * step + 1]

    return f


@pytest.mark.parametrize("step", [2, 3, 4])
def test_strided_loads_are_one_dense_load_and_a_shuffle_with_the_same_result(step):
    """Each lane ``step`` elements apart (a stride-``step`` conv's input along its output's rows):
    one load of the elements the lanes span, every ``step``-th picked out; nothing past the last
    lane's element is read (the buffer ends right after it)."""
    func = _every_other(step)
    text = codegen.lowered(func).script()
    assert text.count("T.Shuffle") == 2 and f", {step}, 16)]" not in text
    assert f"T.Ramp(0, 1, {step * 15 + 1})" in text  # from the first lane's element to the last's
    args = _random(func, np.random.default_rng(step))
    np.testing.assert_array_equal(_run(func, codegen.PIPELINE, args)[1], _run(func, "s_tir", args)[1])


def test_strided_loads_from_a_local_tile_and_wider_strides_stay():
    assert "T.Shuffle" not in codegen.lowered(_every_other(2, scope="local")).script()
    assert "T.Shuffle" not in codegen.lowered(_every_other(5)).script()


AVX512 = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}


def _scaled(lanes: int):
    """b[i] = 2 a[i] over rows of ``lanes`` elements, vectorized along the row; ``a`` ends right
    after its last row."""

    @T.prim_func(s_tir=True)
    def f(a: T.Buffer((3, lanes), "float32"), b: T.Buffer((3, lanes), "float32")):
        for r in range(3):
            for w in T.vectorized(lanes):
                with T.sblock("b"):
                    vr, vw = T.axis.remap("SS", [r, w])
                    b[vr, vw] = a[vr, vw] * T.float32(2.0)

    return f


@pytest.mark.parametrize("lanes", [5, 7, 14])
def test_loads_of_an_odd_lane_count_are_one_masked_load_on_avx512(lanes):
    """Built for AVX-512, a row of 5-15 lanes (not a power of two) is one masked load of the
    next power of two, its extra lanes masked off; the same values as TVM's own build (run where
    the host has AVX-512, build only elsewhere)."""
    func = _scaled(lanes)
    assert codegen.lowered(func, AVX512).script().count("masked_load") == 1
    assert "masked_load" not in codegen.lowered(func, {"kind": "llvm", "mcpu": "haswell"}).script()
    asm = codegen.compile(tvm.IRModule({"main": func}), AVX512).mod.inspect_source("asm")
    assert "vinsert" not in asm  # LLVM's split of such a load: 8 + 4 + 2, joined by inserts
    if vector_unit(HOST).lanes == 16:
        args = _random(func, np.random.default_rng(lanes))
        np.testing.assert_array_equal(_run(func, codegen.PIPELINE, args)[1], 2 * args[0])


@pytest.mark.parametrize("lanes", [3, 4, 16, 24])
def test_loads_of_few_lanes_a_power_of_two_or_more_than_a_register_stay(lanes):
    assert "masked_load" not in codegen.lowered(_scaled(lanes), AVX512).script()


def test_tuning_builds_candidates_through_the_same_pipeline():
    """MetaSchedule's candidates are measured as the workbench builds them (``build_candidate``:
    in this process and in its build workers, found by name)."""
    import tvm_ffi

    assert tvm_ffi.get_global_func(codegen.BUILD_CANDIDATE) is not None
    target = target_from({"kind": "llvm", "mcpu": "skylake-avx512"})
    built = codegen.build_candidate(tvm.IRModule({"main": _interleave(3, 3)}), target)
    assert "vpermt2ps" in built.inspect_source("asm") or "vpermi2ps" in built.inspect_source("asm")


def _tiled_rows(rows: int, tile: int, scope: str = "local"):
    """b = 2a, each of ``rows`` parallel rows through a tile of ``tile`` floats (a register tile
    allocated inside the parallel loop, as ``cache_write`` + ``reverse_compute_at`` leave it)."""

    @T.prim_func
    def f(a: T.Buffer((rows, tile), "float32"), b: T.Buffer((rows, tile), "float32")):
        for r in T.parallel(rows):
            acc = T.alloc_buffer((tile,), "float32", scope=scope)
            for i in T.vectorized(tile):
                acc[i] = a[r, i] * T.float32(2.0)
            for i in T.vectorized(tile):
                b[r, i] = acc[i]

    return f


def _workspace_calls(func, pipeline: str = codegen.PIPELINE) -> int:
    """How often the LLVM code fetches the runtime's workspace allocator (once per call site)."""
    built = tvm.compile(tvm.IRModule({"main": func}), target=target_from(HOST), tir_pipeline=pipeline)
    return sum("load ptr, ptr @__TVMBackendAllocWorkspace" in line for line in built.mod.inspect_source("ll").splitlines())


@pytest.mark.parametrize("scope", ["local", "global"])
def test_a_small_tile_in_a_parallel_loop_lives_on_the_stack(scope):
    """TVM takes a ``local`` tile (or a ``global`` one over 1 KiB) from the workspace pool once per
    iteration of the parallel loop around it; ours keeps it on the thread's stack, with the same
    result. A tile over ``STACK_BYTES`` stays in the pool."""
    small = _tiled_rows(8, 512, scope)  # 2 KiB
    assert _workspace_calls(small) == 0
    assert _workspace_calls(small, "s_tir") > 0  # what TVM alone does
    args = _random(small, np.random.default_rng(1))
    np.testing.assert_array_equal(_run(small, codegen.PIPELINE, args)[1], 2 * args[0])
    big = _tiled_rows(2, codegen.STACK_BYTES // 4 + 16, scope)
    assert _workspace_calls(big) > 0
    args = _random(big, np.random.default_rng(2))
    np.testing.assert_array_equal(_run(big, codegen.PIPELINE, args)[1], 2 * args[0])


def test_the_stack_takes_at_most_stack_total_a_function_and_leaves_tvms_own_small_buffers_alone():
    """Tiles of ``STACK_BYTES`` each go on the stack until a function holds ``STACK_TOTAL`` of
    them; a ``global`` buffer under 1 KiB, which TVM keeps on the stack itself, is not marked."""
    tiles = [tirx.decl_buffer((codegen.STACK_BYTES // 4,), "float32", name=f"t{i}", scope="local")
             for i in range(codegen.STACK_TOTAL // codegen.STACK_BYTES + 2)]
    small = tirx.decl_buffer((16,), "float32", name="small")
    body = tirx.SeqStmt([tirx.AllocBuffer(b) for b in tiles + [small]] + [tirx.Evaluate(tirx.IntImm("int32", 0))])
    func = tirx.PrimFunc([], body)
    marked: list[str] = []
    tvm_ffi.structural_walk(codegen.small_buffers_on_stack(func).body,
                            [(tirx.AllocBuffer, lambda a: marked.append(a.buffer.name) if a.annotations else None)])
    assert marked == [b.name for b in tiles[:codegen.STACK_TOTAL // codegen.STACK_BYTES]]
