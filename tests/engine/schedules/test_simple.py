"""The analytic schedule of kernels that reduce rows and then write them (softmax, layer norm):
parallel row loops, the statistics computed per row, a vector loop; checked against NumPy."""

from __future__ import annotations

import pytest

from workbench.engine.base.errors import LoopError
from workbench.engine.schedules.simple import rows_steps
from workbench.engine.schedules.policy import analytic_steps
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.loops.primitives import apply_steps, list_blocks, list_loops
from workbench.engine.build.program import make_program

HOST = {"kind": "llvm", "num-cores": 2}


def _softmax(shape: tuple[int, ...], axis: int = -1):
    b = GraphBuilder("sm")
    b.op("sm", "softmax", b.input("x", shape, "NHIJ"[-len(shape):]), axis=axis)
    return make_program(b.build())


def _layer_norm(rows: int, width: int):
    b = GraphBuilder("ln")
    b.op("ln", "layer_norm", b.input("x", (1, rows, width), "NTC"), b.const("ln.weight", (width,), "C"),
         b.const("ln.bias", (width,), "C"))
    return make_program(b.build())


@pytest.mark.parametrize("make", [lambda: _softmax((1, 3, 20, 48)), lambda: _softmax((2, 5, 13)),
                                  lambda: _softmax((1, 4, 6, 10), axis=1), lambda: _layer_norm(19, 40)],
                         ids=["softmax", "softmax-odd", "softmax-axis1", "layer_norm"])
def test_rows_schedule_matches_the_reference(make) -> None:
    prog = make()
    (kernel,) = prog.funcs
    steps = analytic_steps(prog.funcs[kernel], kernel, HOST, complex_op=False)
    func = apply_steps(prog.funcs[kernel], steps).mod["main"]
    result = prog.with_funcs({kernel: func}).build(HOST).verify()
    assert result.ok, result


def test_rows_run_in_parallel_with_statistics_per_row_and_a_vector_loop() -> None:
    prog = _softmax((1, 12, 32, 64))
    (kernel,) = prog.funcs
    sch = apply_steps(prog.funcs[kernel], rows_steps(prog.funcs[kernel], kernel, HOST))
    out = list_blocks(sch)[-1]
    loops = list_loops(sch, out)
    assert loops[0].kind == "parallel" and loops[0].extent == 12 * 32
    assert loops[-1].kind == "vectorized"
    for producer in list_blocks(sch)[:-1]:  # under the row loop: one row's max and sum at a time
        assert list_loops(sch, producer)[0].name == loops[0].name


def test_a_single_block_is_refused() -> None:
    b = GraphBuilder("r")
    b.op("r", "relu", b.input("x", (4, 8), "NC"))
    prog = make_program(b.build())
    (kernel,) = prog.funcs
    with pytest.raises(LoopError, match="one block"):
        rows_steps(prog.funcs[kernel], kernel, HOST)


def test_blocks_without_enough_shared_rows_are_each_parallel_and_vectorized() -> None:
    """softmax over the channels of a (1, C, H, W) tensor: the statistics' rows are not the
    output's leading loops, so every block runs its own rows in parallel."""
    prog = _softmax((1, 4, 6, 16), axis=1)
    (kernel,) = prog.funcs
    sch = apply_steps(prog.funcs[kernel], rows_steps(prog.funcs[kernel], kernel, HOST))
    for block in list_blocks(sch):
        assert any(lp.kind == "parallel" for lp in list_loops(sch, block)), block
    assert list_loops(sch, list_blocks(sch)[-1])[-1].kind == "vectorized"
    assert prog.with_funcs({kernel: sch.mod["main"]}).build(HOST).verify().ok
