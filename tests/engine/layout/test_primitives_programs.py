"""Random primitive sequences on a small conv graph (Hypothesis): every accepted sequence builds
a program that matches the reference; every refused primitive says why and changes nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.engine.base.errors import LayoutError
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_layout, current
from workbench.engine.build.program import make_program

TARGET = {"kind": "llvm", "num-cores": 2}


def _graph():
    b = GraphBuilder("small")
    x = b.input("data", (1, 4, 6, 6))
    y = b.op("conv", "conv2d", x, b.const("conv.weight", (8, 4, 3, 3)), padding=1)
    b.op("relu", "relu", y)
    return b.build()


GRAPH = _graph()
KEYS = ["conv", "data@conv", "conv.weight"]

primitive = st.one_of(
    st.tuples(st.just("split"), st.fixed_dictionaries({"dim": st.integers(-1, 5),
                                                        "factors": st.lists(st.integers(-1, 9), min_size=1, max_size=3)})),
    st.tuples(st.just("reorder"), st.fixed_dictionaries({"perm": st.permutations(range(4)) | st.lists(st.integers(0, 5),
                                                                                                   max_size=5)})),
    st.tuples(st.just("fuse"), st.fixed_dictionaries({"dims": st.lists(st.integers(0, 5), min_size=1, max_size=3)})),
    st.tuples(st.just("unfold"), st.fixed_dictionaries({"dim": st.integers(0, 4), "tile": st.integers(0, 8),
                                                         "stride": st.integers(0, 8)})),
    st.tuples(st.just("pad"), st.fixed_dictionaries({"dim": st.integers(0, 4), "before": st.integers(-1, 2),
                                                      "after": st.integers(0, 2)})),
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(KEYS), primitive), min_size=1, max_size=3), st.integers(0, 1000))
def test_random_primitives_are_applied_correctly_or_refused_cleanly(actions, seed):
    book, applied = LayoutBook(), 0
    for key, (prim, args) in actions:
        before = current(GRAPH, book, key)
        try:
            book = apply_layout(GRAPH, book, key, prim, dict(args))
            applied += 1
        except LayoutError as e:
            assert str(e) and prim in str(e) or "dim" in str(e) or "argument" in str(e), str(e)
            assert current(GRAPH, book, key) == before  # a refusal changes nothing
    if applied:
        ver = make_program(GRAPH, book).build(TARGET).verify(GRAPH.random_inputs(seed))
        assert ver.ok, (actions, ver.max_rel_error)
