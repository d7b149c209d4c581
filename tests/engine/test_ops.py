"""Every operator's TVM definition, built with LLVM, against its NumPy/PyTorch reference on
random data; the test fails if an operator of the library has no case here."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engine.graph import GraphBuilder
from workbench.engine.ops import OPS
from workbench.engine.program import make_program

TARGET = {"kind": "llvm", "num-cores": 2}


def _one(type_: str, shapes: list[tuple], consts: tuple[int, ...] = (), **attrs):
    """A graph of one op on inputs (or constants, by position) of these shapes."""
    def build():
        b = GraphBuilder(type_)
        names = [(b.const if i in consts else b.input)(f"x{i}", s) for i, s in enumerate(shapes)]
        b.op("op", type_, *names, **attrs)
        return b.build()
    return build


CASES = {
    "conv1d": _one("conv1d", [(2, 6, 17), (8, 6, 3)], (1,), stride=2, padding=1),
    "conv2d": _one("conv2d", [(1, 5, 11, 9), (7, 5, 3, 3)], (1,), padding=1),
    "conv2d_grp_dil": _one("conv2d", [(1, 8, 12, 12), (8, 4, 3, 3)], (1,), padding=2, dilation=2, groups=2),
    "conv2d_dep": _one("conv2d", [(1, 6, 9, 9), (6, 1, 3, 3)], (1,), padding=1, stride=2, groups=6, depthwise=True),
    "conv3d": _one("conv3d", [(1, 3, 5, 6, 6), (4, 3, 3, 3, 3)], (1,), padding=1),
    "conv_transpose2d": _one("conv_transpose2d", [(1, 4, 5, 5), (4, 3, 4, 4)], (1,), stride=2, padding=1),
    "conv_transpose3d": _one("conv_transpose3d", [(1, 3, 3, 3, 3), (3, 2, 4, 4, 4)], (1,), stride=2, padding=1),
    "matmul": _one("matmul", [(9, 13), (13, 7)], (1,)),
    "matmul_batched_tb": _one("matmul", [(2, 5, 6), (2, 7, 6)], transpose_b=True),
    "relu": _one("relu", [(3, 17)]),
    "relu6": _one("relu6", [(3, 17)]),
    "gelu": _one("gelu", [(3, 17)]),
    "scale": _one("scale", [(3, 17)], factor=0.25),
    "add": _one("add", [(3, 17), (3, 17)]),
    "multiply": _one("multiply", [(3, 17), (3, 17)]),
    "layout_transform": _one("layout_transform", [(3, 17)]),
    "bias_add": _one("bias_add", [(2, 5, 4), (5,)], (1,), axis=1),
    "pad": _one("pad", [(1, 2, 5, 5)], before=(0, 0, 2, 1), after=(0, 0, 1, 3)),
    "pool2d_max": _one("pool2d", [(1, 3, 9, 9)], kernel=3, stride=2, padding=1, mode="max"),
    "pool2d_avg": _one("pool2d", [(1, 3, 8, 8)], kernel=2, stride=2, mode="avg"),
    "softmax": _one("softmax", [(4, 19)], axis=-1),
    "layer_norm": _one("layer_norm", [(6, 16), (16,), (16,)], (1, 2)),
    "reshape": _one("reshape", [(2, 3, 4)], shape=(6, 4)),
    "transpose": _one("transpose", [(2, 3, 4)], perm=(2, 0, 1)),
}


def test_every_operator_of_the_library_has_a_case():
    covered = {build().node("op").type for build in CASES.values()}
    assert covered == set(OPS), f"no test case for {sorted(set(OPS) - covered)}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_tvm_definition_matches_the_reference_on_random_data(case):
    graph = CASES[case]()
    values = graph.random_inputs(seed=7)
    assert all(np.count_nonzero(v) == v.size for v in values.values())  # random, not zeros
    ref = graph.reference(values)["op"]
    assert np.abs(ref).max() > 0
    built = make_program(graph).build(TARGET)
    got = built.run(values)["op"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))
    assert built.verify(values).ok


def test_reference_agrees_with_pytorch_on_convolutions():
    torch = pytest.importorskip("torch")
    g = CASES["conv2d_grp_dil"]()
    v = g.random_inputs(seed=3)
    want = torch.nn.functional.conv2d(torch.from_numpy(v["x0"]), torch.from_numpy(v["x1"]), padding=2, dilation=2,
                                      groups=2).numpy()
    np.testing.assert_allclose(g.reference(v)["op"], want, rtol=1e-4, atol=1e-4)
    t = CASES["conv_transpose2d"]()
    v = t.random_inputs(seed=3)
    want = torch.nn.functional.conv_transpose2d(torch.from_numpy(v["x0"]), torch.from_numpy(v["x1"]), stride=2,
                                                padding=1).numpy()
    np.testing.assert_allclose(t.reference(v)["op"], want, rtol=1e-4, atol=1e-4)
