"""Where a conversion block reads and writes (``conversion.offsets.CopyAccess``), checked against
TVM's own arithmetic on the kernel's index expressions."""

import numpy as np
import pytest
from tvm import tirx
from tvm.sym.analyzer import Analyzer

from tests.engine.schedules.graphs import LAYOUTS, ODD, conversion_kernels, cv_graph
from workbench.engine.layout.book import LayoutBook
from workbench.engine.schedules.conversion.offsets import CopyAccess
from workbench.engine.layout.keys import apply_layout
from workbench.engine.loops.primitives import block_nest, list_loops
from workbench.engine.build.program import make_program


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_the_order_model_reads_the_kernels_own_addresses(name):
    """``CopyAccess.offsets`` (NumPy) agrees with TVM's arithmetic on the kernel's index
    expressions at random points, for every kind of conversion and its inverse."""
    g = cv_graph(ODD)
    book = LayoutBook()
    for prim, args in LAYOUTS[name]:
        book = apply_layout(g, book, "data", prim, args)
        book = apply_layout(g, book, "relu2", prim, args)
    prog = make_program(g, book)
    rng = np.random.default_rng(0)
    for k in conversion_kernels(prog):
        func = prog.funcs[k.name]
        loops = list_loops(func, k.name)
        access = CopyAccess.of(func, k.name, loops)
        assert access is not None
        points = rng.integers(0, [lp.extent for lp in loops], size=(20, len(loops)))
        src, dst = access.offsets([points[:, j] for j in range(len(loops))])
        realize = block_nest(func, k.name)[0]
        for p, got_src, got_dst in zip(points, src, dst):
            ana = Analyzer()
            for iv, x in zip(realize.block.iter_vars, p):
                ana.bind(iv.var, int(x))
            flat = 0
            for i, n in zip(access.src, access.src_shape):
                flat = flat * n + i
            want = ana.simplify(flat)
            assert isinstance(want, tirx.IntImm) and int(want.value) == got_src, (k.name, p)
            assert got_dst == np.ravel_multi_index(p, access.dst_shape)
