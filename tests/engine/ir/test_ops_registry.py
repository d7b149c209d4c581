"""The op record and the helpers op definitions share (``ir.ops_registry``): a reader's zero
margin, the reduced auxiliary stage, an op's output dim letters, and the library's registration
through ``ir.ops`` alone."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te

from workbench.engine.ir import ops, ops_conv, ops_elementwise, ops_matmul, ops_reduce, ops_shape
from workbench.engine.ir.ops_registry import OPS, margin, reduce_stage


def test_importing_ops_registers_every_family_and_reexports_its_public_names():
    families = {"conv2d": ops_conv, "conv_transpose3d": ops_conv, "matmul": ops_matmul, "gelu": ops_elementwise,
                "bias_add": ops_elementwise, "pool2d": ops_reduce, "layer_norm": ops_reduce, "pad": ops_shape,
                "concat": ops_shape}
    for op, module in families.items():
        assert OPS[op].compute.__module__ == module.__name__, op
    assert ops.OPS is OPS and "opaque" in OPS
    assert ops.tconv_executed_macs is ops_conv.tconv_executed_macs and ops.elementwise is ops_elementwise.elementwise


def test_margin_is_what_the_reader_says_and_none_otherwise():
    def plain(idx, win=None):
        return 0

    def held(idx, win=None):
        return 0

    held.margin = lambda dim: (dim, 2 * dim)
    assert margin(plain, 2) == (0, 0)
    assert margin(held, 3) == (3, 6)


def test_reduce_stage_reduces_one_axis_to_extent_one():
    x = te.placeholder((3, 5), name="x")
    stage = reduce_stage("row_max", lambda i, win=None: x[tuple(i)], (3, 5), 1, lambda i, r: te.max(x[tuple(i)], axis=r))
    assert tuple(int(n) for n in stage.shape) == (3, 1)
    f = tvm.compile(te.create_prim_func([x, stage]), target="llvm")
    data = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    out = tvm.runtime.tensor(np.zeros((3, 1), "float32"))
    f(tvm.runtime.tensor(data), out)
    np.testing.assert_allclose(out.numpy(), data.max(axis=1, keepdims=True))


def test_an_ops_output_dims_follow_its_input_unless_the_rank_changes():
    assert OPS["relu"].dims("NCHW", 4) == "NCHW"
    assert OPS["reshape"].dims("NCHW", 2) == "AB"
    assert OPS["transpose"].dims("NCW", 3, {"perm": (2, 0, 1)}) == "WNC"
    assert OPS["matmul"].dims("MK", 2) == "MN" and OPS["conv2d"].label({"groups": 2}) == "GRP"
