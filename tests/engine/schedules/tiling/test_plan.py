"""The register tile of the expert template (``tiling.plan.plan``) on given vector units:
where rows slide along a reduction loop, and how many rows share a gathered vector."""

from tests.engine.schedules.graphs import conv_graph, depthwise_graph
from workbench.engine.schedules.tiling.analysis import analyse
from workbench.engine.schedules.tiling.plan import plan
from workbench.engine.schedules.tiling.steps import _example
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import VectorUnit


def test_a_tile_slides_only_where_its_window_fits_and_the_strides_agree() -> None:
    """28-wide rows: on AVX-512 (32 registers) 7 rows slide over 3 taps; on AVX2 (16 registers)
    the window of rows does not fit, and 2 rows load their own. At stride 2 (input row 2h + kh)
    rows and taps share nothing."""
    func = make_program(depthwise_graph(28)[0]).funcs["conv"]
    avx512 = plan(analyse(func), VectorUnit(16, 32, True, "AVX-512"), 32768)
    avx2 = plan(analyse(func), VectorUnit(8, 16, True, "AVX2"), 32768)
    assert (avx512.slide, avx512.rows) == ("rk0", 7)
    assert (avx2.slide, avx2.rows) == (None, 2)
    strided = make_program(depthwise_graph(56, stride=2)[0]).funcs["conv"]
    assert all(plan(analyse(strided), unit, 32768).slide is None
               for unit in (VectorUnit(16, 32, True, "AVX-512"), VectorUnit(8, 16, True, "AVX2")))


def test_a_stride_2_conv_shares_each_gathered_vector_among_many_output_channels() -> None:
    """On NCHW a stride-2 conv's vector along the output width gathers its input every other
    float; the output channels share each such vector, so the tile takes one vector and as many
    channels as fit, dividing them: 16 of 128 on AVX-512, 8 on AVX2. A GEMM whose B is contiguous
    along the vector keeps its two-dimensional tile."""
    func = make_program(conv_graph(2, 16, 128, 29, 3, stride=2)[0]).funcs["conv"]
    avx512 = plan(analyse(func), VectorUnit(16, 32, True, "AVX-512"), 32768)
    avx2 = plan(analyse(func), VectorUnit(8, 16, True, "AVX2"), 32768)
    assert (avx512.rows_loop, avx512.nvec, avx512.rows) == ("i1", 1, 16)
    assert (avx2.rows_loop, avx2.nvec, avx2.rows) == ("i1", 1, 8)
    gemm = plan(analyse(_example(64)[0]), VectorUnit(8, 16, True, "AVX2"), 32768)
    assert gemm.nvec > 1  # contiguous B: several vectors per row, not one shared by many rows


def test_a_matrix_vector_product_streams_its_packed_weight_in_few_rows() -> None:
    """A decode step's GEMV on a packed weight (``nkn``, 16 columns a block): each row of the tile
    streams its own block of the weight, read once, so the tile keeps at most ``MAX_STREAMS``
    rows (it took 22 of the 352 blocks before, and ran at a third of the speed). A GEMM whose
    rows share the weight's vectors keeps its rows."""
    from workbench.engine.base.step import Step
    from workbench.engine.schedules.tiling.plan import MAX_STREAMS
    from workbench.engine.session.session import new_session, replay

    unit = VectorUnit(16, 32, True, "AVX-512")
    gemv = replay(new_session("gmm", m=1, n=5632, k=2048)).push(Step.make("preset", "gmm", "nkn", m=1, n=16))
    tile = plan(analyse(gemv.program.funcs["gmm"]), unit, 32768)
    assert tile.lanes == 16 and tile.rows_loop is not None and 1 < tile.rows <= MAX_STREAMS
    gemm = replay(new_session("gmm", m=64, n=512, k=256)).push(Step.make("preset", "gmm", "nkn", m=16, n=16))
    assert plan(analyse(gemm.program.funcs["gmm"]), unit, 32768).rows > MAX_STREAMS
