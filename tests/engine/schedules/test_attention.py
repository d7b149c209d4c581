"""The attention kernel's analytic schedule (``schedules.attention``): every scheduled kernel
against PyTorch's attention and the unscheduled kernel on random data (the llama shapes, odd
sizes: 3 K/V heads, 37 tokens, a decode step); the heads and query blocks parallel with every
stage under them; the policy's expert schedule of it; other kernels refused."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engine.base.errors import LoopError
from workbench.engine.build.program import make_program
from workbench.engine.ir.graph import GraphBuilder
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_layout
from workbench.engine.loops.primitives import apply_steps, list_blocks, list_loops
from workbench.engine.schedules.attention import ATTENTION_BLOCKS, attention_steps, is_attention, query_block
from workbench.engine.schedules.policy import analytic_steps, choose

torch = pytest.importorskip("torch")

HOST = {"kind": "llvm", "num-cores": 2}


def _attention(heads: int, kv: int, queries: int, keys: int, dim: int, causal: bool = True, batch: int = 1,
               layouts: tuple = ()):
    """The attention program; ``layouts``: (tensor, layout primitive, args) applied first."""
    b = GraphBuilder("attn")
    q = b.input("q", (batch, heads, queries, dim))
    k, v = (b.input(n, (batch, kv, keys, dim)) for n in ("k", "v"))
    b.op("op", "attention", q, k, v, causal=causal)
    graph, book = b.build(), LayoutBook()
    for tensor, primitive, args in layouts:
        book = apply_layout(graph, book, tensor, primitive, args)
    return make_program(graph, book)


def _torch(values, causal: bool):
    q, k, v = (torch.from_numpy(values[n].astype(np.float64)) for n in ("q", "k", "v"))
    s, t = q.shape[-2], k.shape[-2]
    mask = torch.ones(s, t, dtype=torch.bool).tril(t - s) if causal else None
    with torch.no_grad():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).numpy()


SHAPES = {
    "llama-prefill": (32, 4, 128, 128, 64, True),
    "llama-decode": (32, 4, 1, 129, 64, True),
    "odd": (6, 3, 37, 37, 16, True),
    "odd-decode": (6, 3, 1, 38, 16, True),
    "odd-chunk": (6, 3, 5, 37, 24, True),
    "odd-vector-keys": (6, 3, 15, 48, 16, True),
    "one-vector-of-keys": (2, 1, 3, 20, 8, True),
    "not-causal": (4, 2, 40, 40, 8, False),
}


@pytest.mark.parametrize("case", list(SHAPES))
def test_the_scheduled_kernel_matches_pytorch_and_the_unscheduled_kernel(case) -> None:
    *shape, causal = SHAPES[case]
    prog = _attention(*shape, causal=causal)
    func = prog.funcs["op"]
    scheduled = apply_steps(func, attention_steps(func, "op", HOST)).mod["main"]
    values = prog.graph.random_inputs(seed=1)
    got = prog.with_funcs({"op": scheduled}).build(HOST).run(values)["op"]
    unscheduled = prog.build(HOST).run(values)["op"]
    np.testing.assert_allclose(got, _torch(values, causal), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, unscheduled, rtol=1e-5, atol=1e-6)


def test_heads_and_query_blocks_run_in_parallel_with_every_stage_under_them() -> None:
    prog = _attention(32, 4, 128, 128, 64)
    func = prog.funcs["op"]
    sch = apply_steps(func, attention_steps(func, "op", HOST))
    loops = list_loops(sch, "op")
    block = query_block(128, 128)
    assert 1 < block < 128
    assert loops[0].kind == "parallel" and loops[0].extent == 32 * 128 // block
    assert loops[-1].kind == "vectorized" and loops[-1].extent == 64  # the head dim
    for stage in ATTENTION_BLOCKS:  # a query block's scores stay in cache between the stages
        stage_loops = list_loops(sch, stage)
        assert stage_loops[0].name == loops[0].name, stage
        assert stage_loops[1].extent == block, stage
    assert list_loops(sch, "attn_prob")[-1].kind == "vectorized"
    assert list_loops(sch, "attn_qk")[-1].kind == "vectorized"


def test_the_scores_read_each_query_block_s_keys_from_a_transposed_copy() -> None:
    """K is read along the keys (the scores' vector): each query block copies its K head into a
    buffer stored (..., head dim, keys) under its parallel loop, and the scores read that."""
    prog = _attention(32, 4, 128, 128, 64)
    func = prog.funcs["op"]
    steps = attention_steps(func, "op", HOST)
    (copy,) = [s.kwargs["block"] for s in steps if s.primitive == "transform_layout"]
    assert [s.primitive for s in steps if s.kwargs.get("block") == copy] == ["compute_at", "transform_layout"]
    assert any(s.primitive == "cache_read" and s.kwargs["block"] == "attn_qk" for s in steps)
    sch = apply_steps(func, steps)
    assert list_loops(sch, copy)[0].name == list_loops(sch, "op")[0].name  # per query block, in parallel


def test_a_decode_step_runs_its_heads_in_parallel_and_its_whole_vectors_of_keys_as_vectors() -> None:
    """129 keys: the 128 of whole vectors partitioned from the last one, and vectorized."""
    prog = _attention(32, 4, 1, 129, 64)
    func = prog.funcs["op"]
    steps = attention_steps(func, "op", HOST)
    sch = apply_steps(func, steps)
    loops = list_loops(sch, "op")
    assert loops[0].kind == "parallel" and loops[0].extent == 32
    (cut,) = [s for s in steps if s.primitive == "loop_partition"]
    assert cut.kwargs["factors"][0] == 128
    whole = next(b for b in list_blocks(sch) if b.startswith("attn_qk") and any(
        lp.kind == "vectorized" for lp in list_loops(sch, b)))
    assert [lp.extent for lp in list_loops(sch, whole) if lp.kind == "vectorized"][0] in (4, 8, 16)


def test_query_blocks_divide_the_queries_and_keep_a_block_small() -> None:
    for queries, keys in [(128, 128), (37, 37), (1, 129), (512, 2048), (7, 100000)]:
        qb = query_block(queries, keys)
        assert queries % qb == 0 and qb >= 1
        assert qb == 1 or 2 * 4 * qb * keys <= 16 * 1024


def test_the_policy_gives_attention_its_expert_schedule() -> None:
    prog = _attention(6, 3, 37, 37, 16)
    sched = choose(prog, "op", HOST, expert=True)
    assert sched.kind == "expert"
    assert list(sched.steps) == attention_steps(prog.funcs["op"], "op", HOST)
    assert choose(prog, "op", HOST).kind == "default"  # without asking, as every kernel
    assert analytic_steps(prog.funcs["op"], "op", HOST) == list(sched.steps)


def test_another_kernel_is_refused() -> None:
    b = GraphBuilder("sm")
    b.op("sm", "softmax", b.input("x", (2, 5, 13)), axis=-1)
    prog = make_program(b.build())
    (kernel,) = prog.funcs
    assert tuple(list_blocks(prog.funcs[kernel])[:-1]) != ATTENTION_BLOCKS
    with pytest.raises(LoopError, match="not an attention kernel"):
        attention_steps(prog.funcs[kernel], kernel, HOST)


def test_inputs_in_other_layouts_are_scheduled_and_an_output_in_one_is_refused() -> None:
    """K read with its head dim blocked (a converted input): the same schedule, still right. An
    output stored with its head dim blocked has other loops than the scores: refused, not
    blocked along the wrong loop (the policy gives it what it gave before)."""
    blocked_k = (("k", "split", {"dim": 3, "factors": [2, 8]}), ("k", "reorder", {"perm": [0, 1, 3, 2, 4]}))
    prog = _attention(6, 3, 1, 38, 16, layouts=blocked_k)
    (kernel,) = [k.name for k in prog.plan.kernels if "op" in k.ops]
    func = prog.funcs[kernel]
    scheduled = apply_steps(func, attention_steps(func, kernel, HOST)).mod["main"]
    assert prog.with_funcs({kernel: scheduled}).build(HOST).verify().ok
    blocked_out = (("op", "split", {"dim": 3, "factors": [2, 8]}), ("op", "reorder", {"perm": [0, 1, 3, 2, 4]}))
    prog = _attention(6, 3, 37, 37, 16, layouts=blocked_out)
    (kernel,) = [k.name for k in prog.plan.kernels if "op" in k.ops]
    with pytest.raises(LoopError, match="another layout"):
        attention_steps(prog.funcs[kernel], kernel, HOST)
    assert not is_attention(prog.funcs[kernel])
