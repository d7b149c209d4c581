"""The decoder ops (``ops_decoder``): each, built with LLVM, and its library reference against
PyTorch on odd sizes (3 key/value heads, 37 tokens); FLOP counts against closed forms; each
under layouts (its own tensors laid out, and reading a producer's blocked layout); the causal
mask (a later token leaves earlier outputs unchanged); a softmax whose exp would overflow unless
the row max is subtracted; and the K/V cache concatenation (the library's ``concat``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.buffers import check_stored_buffers
from workbench.engine.layout.book import LayoutBook
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.keys import apply_layout
from workbench.engine.ir.ops_decoder import DECODER_OPS
from workbench.engine.build.program import make_program
from workbench.engine.layout.propagate import plan_layouts

torch = pytest.importorskip("torch")
F = torch.nn.functional

TARGET = {"kind": "llvm", "num-cores": 2}


def torch_rotary(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def torch_attention(q, k, v, scale=None, causal=False):
    """PyTorch's own attention; its causal mask aligned bottom-right (query i at T - S + i)."""
    s, t = q.shape[-2], k.shape[-2]
    mask = torch.ones(s, t, dtype=torch.bool).tril(t - s) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)


def one(type_: str, shapes: list[tuple], consts: tuple[int, ...] = (), **attrs):
    """A graph of one op ``op`` on inputs (or constants, by position) ``x0, x1, ...``."""
    b = GraphBuilder(type_)
    names = [(b.const if i in consts else b.input)(f"x{i}", s) for i, s in enumerate(shapes)]
    b.op("op", type_, *names, **attrs)
    return b.build()


Q, KV = (1, 6, 37, 16), (1, 3, 37, 16)  # 6 query heads in 3 groups, 37 tokens
# case -> (graph, PyTorch on the op's inputs in order, FLOPs)
CASES = {
    "rms_norm": (one("rms_norm", [(2, 37, 24), (24,)], (1,), eps=1e-5),
                 lambda x, w: F.rms_norm(x, (24,), w, 1e-5), 4 * 2 * 37 * 24),
    "rotary": (one("rotary", [Q, (37, 16), (37, 16)], (1, 2)), torch_rotary, 4 * 6 * 37 * 16),
    "attention": (one("attention", [Q, KV, KV]), torch_attention, 6 * 37 * 37 * (4 * 16 + 8)),
    "attention_causal": (one("attention", [Q, KV, KV], scale=0.3, causal=True),
                         lambda q, k, v: torch_attention(q, k, v, 0.3, True), 6 * 37 * 37 * (4 * 16 + 8)),
    # a decode step: one query after a cache of 37 positions and its own
    "attention_decode": (one("attention", [(1, 6, 1, 16), (1, 3, 38, 16), (1, 3, 38, 16)], causal=True),
                         lambda q, k, v: torch_attention(q, k, v, None, True), 6 * 1 * 38 * (4 * 16 + 8)),
    # a chunk of 5 queries after 32 cached positions, batch 2, 5 heads in one group
    "attention_chunk": (one("attention", [(2, 5, 5, 8), (2, 1, 37, 8), (2, 1, 37, 8)], causal=True),
                        lambda q, k, v: torch_attention(q, k, v, None, True), 2 * 5 * 5 * 37 * (4 * 8 + 8)),
    "silu": (one("silu", [(3, 37)]), F.silu, 5 * 3 * 37),
    "silu_mul": (one("silu_mul", [(3, 37), (3, 37)]), lambda g, u: F.silu(g) * u, 6 * 3 * 37),
    "cache_concat": (one("concat", [KV, (1, 3, 1, 16)], axis=2), lambda a, b: torch.cat((a, b), dim=2), 0),
}


def _run(graph, values):
    return make_program(graph).build(TARGET).run(values)["op"]


def _torch(case, graph, values):
    node = graph.node("op")
    with torch.no_grad():
        return CASES[case][1](*(torch.from_numpy(values[i].astype(np.float64)) for i in node.inputs)).numpy()


def test_every_decoder_op_has_a_case():
    assert {build.node("op").type for build, _, _ in CASES.values()} == {*DECODER_OPS, "concat"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_tvm_definition_and_the_reference_match_pytorch(case):
    graph, _, flops = CASES[case]
    values = graph.random_inputs(seed=3)
    want = _torch(case, graph, values)
    assert want.shape == graph.tensor("op").shape and np.abs(want).max() > 0.1
    tol = dict(rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))
    np.testing.assert_allclose(graph.reference(values)["op"], want, rtol=1e-6, atol=1e-7)  # float32 values
    np.testing.assert_allclose(_run(graph, values), want, **tol)
    assert graph.flops("op") == flops


def test_attention_is_safe_where_the_scores_overflow_exp():
    graph = one("attention", [Q, KV, KV], scale=60.0, causal=True)  # scores to several hundred
    values = graph.random_inputs(seed=4)
    scores = values["x0"][0, 0] @ values["x1"][0, 0].T * 60.0
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.exp(scores.astype(np.float32))).all()  # a naive softmax: inf / inf
    want = torch_attention(*(torch.from_numpy(values[f"x{i}"].astype(np.float64)) for i in range(3)), 60.0, True)
    got = _run(graph, values)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-3, atol=1e-4)


def test_a_later_token_leaves_earlier_outputs_unchanged():
    graph = one("attention", [Q, KV, KV], causal=True)
    built = make_program(graph).build(TARGET)
    values = graph.random_inputs(seed=5)
    later = {k: v.copy() for k, v in values.items()}
    for name in ("x0", "x1", "x2"):
        later[name][..., 20:, :] += 1.0  # tokens 20..36 change: their q, k and v
    before, after = built.run(values)["op"], built.run(later)["op"]
    np.testing.assert_array_equal(after[..., :20, :], before[..., :20, :])
    assert np.abs(after[..., 20:, :] - before[..., 20:, :]).min(axis=-1).max() > 1e-3
    unmasked = one("attention", [Q, KV, KV])  # without the mask, every output changes
    u = make_program(unmasked).build(TARGET)
    assert np.abs(u.run(later)["op"][..., :20, :] - u.run(values)["op"][..., :20, :]).max() > 1e-3


########## Under layouts ##########

LAYOUTS = {  # case -> layout steps (tensor, primitive, args) on the op's output, inputs and tables
    "rms_norm": [("op", "split", {"dim": 2, "factors": [3, 8]}), ("op", "reorder", {"perm": [0, 2, 1, 3]}),
                 ("x0", "reorder", {"perm": [2, 0, 1]})],
    "rotary": [("op", "split", {"dim": 3, "factors": [2, 8]}), ("op", "reorder", {"perm": [0, 1, 3, 2, 4]}),
               ("x1", "reorder", {"perm": [1, 0]}), ("x0", "split", {"dim": 2, "factors": [-1, 8]})],
    "attention_causal": [("op", "split", {"dim": 3, "factors": [2, 8]}), ("op", "reorder", {"perm": [0, 1, 3, 2, 4]}),
                         ("x1", "reorder", {"perm": [0, 1, 3, 2]}), ("x2", "split", {"dim": 2, "factors": [-1, 8]})],
    "attention_decode": [("x1", "split", {"dim": 3, "factors": [2, 8]}), ("x1", "reorder", {"perm": [0, 1, 3, 2, 4]})],
    "silu_mul": [("op", "split", {"dim": 1, "factors": [-1, 8]}), ("x1", "reorder", {"perm": [1, 0]})],
    "cache_concat": [("op", "split", {"dim": 3, "factors": [2, 8]}), ("op", "reorder", {"perm": [0, 1, 3, 2, 4]}),
                     ("x0", "split", {"dim": 2, "factors": [-1, 4]})],
}


@pytest.mark.parametrize("case", sorted(LAYOUTS))
def test_each_op_computes_under_layouts(case):
    graph = CASES[case][0]
    book = LayoutBook()
    for key, prim, args in LAYOUTS[case]:
        book = apply_layout(graph, book, key, prim, args)
    laid_out = {b.tensor for b in plan_layouts(graph, book).buffers.values() if not b.layout.is_identity}
    assert laid_out == {key for key, _, _ in LAYOUTS[case]}
    check_stored_buffers(graph, book, seed=6)


@pytest.mark.parametrize("op, consts", [("rms_norm", ((24,),)), ("silu_mul", ((37, 24),)), ("silu", ())])
def test_an_op_reads_a_gmm_output_in_a_blocked_layout(op, consts):
    """A dense layer's output blocked (N/8, M, 8), read by the decoder op after it."""
    b = GraphBuilder(op)
    mm = b.op("mm", "matmul", b.input("x", (37, 16)), b.const("mm.weight", (16, 24), "KN"))
    other = [b.const("gamma", s, "C") if op == "rms_norm" else b.input("u", s) for s in consts]
    b.op("op", op, mm, *other)
    graph = b.build()
    book = apply_layout(graph, LayoutBook(), "mm", "split", {"dim": 1, "factors": [3, 8]})
    book = apply_layout(graph, book, "mm", "reorder", {"perm": [1, 0, 2]})
    prog = check_stored_buffers(graph, book, seed=7)
    assert prog.plan.buffers["mm"].layout.shape == (3, 37, 8)
