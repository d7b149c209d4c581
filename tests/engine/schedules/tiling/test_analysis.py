"""The main block of a complex-op kernel as the expert template reads it
(``tiling.analysis.analyse``): its stride phases, and kernels it refuses."""

import pytest

from tests.engine.schedules.graphs import conv_graph
from workbench.engine.base.errors import LoopError
from workbench.engine.schedules.expert import expert_steps
from workbench.engine.schedules.tiling.analysis import analyse
from workbench.engine.schedules.tiling.steps import _example
from workbench.engine.build.program import make_program

HOST = {"kind": "llvm", "num-cores": 2}


def test_a_loop_longer_than_the_runs_followed_is_no_stride_phase() -> None:
    """Runs are followed up to ``RUN_CAP`` steps: a depthwise conv over 384 channels reads
    affinely along them, which is no transposed conv's phase (it was taken for one of period 2)."""
    graph, op = conv_graph(2, 384, 384, 7, 3, padding=1, groups=384, depthwise=True)
    func = make_program(graph).funcs[op]
    assert analyse(func).phases() == {}
    assert [s.get("factors") for s in expert_steps(func, op, HOST) if s.primitive == "split"] != [[None, 2]]


def test_no_complex_op_is_refused() -> None:
    with pytest.raises(LoopError, match="no complex op"):
        analyse(_example()[1])
