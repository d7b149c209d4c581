"""ALT's joint layout+loop stage for one op, with tiny budgets (a few measurements)."""

import random

import pytest

from workbench.engine.models import zoo
from workbench.engine.base.errors import TuneError
from workbench.engine.layout.book import LayoutBook
from workbench.engine.layout.keys import apply_actions
from workbench.engine.loops.primitives import apply_trace_json
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import DEFAULT_TARGET
from workbench.engine.base.step import Step
from workbench.engine.measure.conversion_rates import conversion_bytes
from workbench.engine.tuning import joint
from workbench.engine.tuning.joint import Candidate, ConversionCosts, JointResult, _pick, joint_tune, layout_space
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.progress import read_progress


def small_gmm():
    return zoo.load("gmm", m=64, n=64, k=64)


def test_space_of_a_conv_is_alt_templates_with_dividing_tiles():
    g = zoo.load("r18_stem")
    space = layout_space(g, "conv")
    assert space[0] == Candidate(None)
    tiled = [c for c in space[1:] if c.preset == "alt_tiled"]
    assert len(tiled) == len(space) - 1 > 50
    for c in tiled:
        kw = c.kwargs
        assert all(112 % t == 0 for t in kw["tiles"]) and 64 % kw["ot"] == 0 and 3 % kw["it"] == 0


@pytest.mark.parametrize("lanes", [8, 16])
def test_layouts_whose_vectorized_dim_splits_a_register_are_not_proposed(lanes):
    g = zoo.load("r18_stem")  # 64 output channels
    space = layout_space(g, "conv", lanes)
    assert space[0] == Candidate(None) and len(space) > 10
    assert {c.kwargs["ot"] for c in space[1:]} == {ot for ot in (8, 16, 32, 64) if ot % lanes == 0}
    gmm = layout_space(small_gmm(), "gmm", lanes)
    assert all(c.kwargs["n"] % lanes == 0 for c in gmm[1:]) and len(gmm) > 1


def test_a_transposed_convs_tiles_hold_whole_pairs_of_stride_phases():
    g = zoo.load("t2d")
    node = g.node("tconv")
    out, stride = g.tensors["tconv"].shape, node.kwargs["stride"]
    tiles = {t for c in layout_space(g, "tconv")[1:] for t in c.kwargs["tiles"]}
    assert tiles and all(t % (2 * stride) == 0 or t in out[2:] for t in tiles)
    assert not tiles & {1, 2}


def test_a_transposed_conv_keeps_every_tile_along_a_dim_of_stride_1():
    from workbench.engine.ir.graph import GraphBuilder

    b = GraphBuilder("t")
    x = b.input("data", (1, 8, 8, 14), "NCHW")
    b.op("tconv", "conv_transpose2d", x, b.const("tconv.weight", (8, 16, 4, 3), "IOHW"), stride=[2, 1], padding=1)
    g = b.build()
    assert g.tensors["tconv"].shape[2:] == (16, 14)
    space = layout_space(g, "tconv")[1:]
    rows = {c.kwargs["tiles"][0] for c in space}
    cols = {c.kwargs["tiles"][1] for c in space}
    assert rows == {4, 8, 16}  # stride 2: multiples of 4 (16's divisors among the tiles)
    assert cols == {1, 2, 7, 14}  # stride 1: no phases, every divisor of 14


def test_space_of_gmm_is_nkn_and_simple_ops_are_refused():
    g = small_gmm()
    assert {c.preset for c in layout_space(g, "gmm")} == {None, "nkn"}
    with pytest.raises(TuneError, match="not a complex op"):
        layout_space(zoo.load("r18_stem"), "relu")


@pytest.mark.parametrize("search", ["model", "random"])
def test_joint_tune_scores_candidates_then_tunes_loops(tmp_path, search):
    g = small_gmm()
    prog_path = tmp_path / "progress.jsonl"
    options = TuneOptions(progress_path=prog_path, seed=1, joint_fraction=0.67, per_candidate=2, search=search)
    res = joint_tune(g, LayoutBook(), "gmm", DEFAULT_TARGET, tmp_path / "wd", 6, options)
    assert len(res.scores) == 2 and res.scores[0][0] == Candidate(None)
    assert res.best_ms <= min(s for _, s in res.scores if s is not None)
    lines = read_progress(prog_path)
    assert {ln["stage"] for ln in lines} == {"joint", "loop"}
    for cand, score in res.scores:  # a layout pays for the conversions it adds to the graph
        kernel = min(ln["latency_ms"] for ln in lines if ln["stage"] == "joint" and ln["layout"] == cand.label)
        assert score > kernel if cand.preset else score == pytest.approx(kernel)
    assert {ln["layout"] for ln in lines if ln["stage"] == "joint"} == {c.label for c, _ in res.scores}
    # the tuned trace re-applies on the chosen layout's kernel and the program is still correct
    book = apply_actions(g, LayoutBook(), res.best.actions(g, "gmm"))
    prog = make_program(g, book)
    prog = prog.with_funcs({"gmm": apply_trace_json(prog.funcs["gmm"], res.trace).mod["main"]})
    assert prog.build().verify().ok


def test_a_layouts_conversions_are_timed_once_each_or_costed_at_copy_speed_over_rpc(monkeypatch):
    g = zoo.load("r18_stem")
    cand = next(c for c in layout_space(g, "conv")[1:] if c.kwargs["ot"] == 16)
    prog = make_program(g, apply_actions(g, LayoutBook(), cand.actions(g, "conv")))
    convs = [k.name for k in prog.plan.kernels if k.conversion is not None]
    assert convs  # the tiled output is converted back for the graph's output
    cache: dict = {}
    first = ConversionCosts(DEFAULT_TARGET, cache).total_ms(prog)
    assert first > 0 and 1 <= len(cache) <= len(convs)
    cache.update({k: 1000.0 for k in cache})  # a second program with the same kernels is not timed again
    assert ConversionCosts(DEFAULT_TARGET, cache).total_ms(make_program(g, prog.plan.book)) == 1000.0 * len(convs)
    monkeypatch.setattr(joint, "copy_bandwidth", lambda target: 10.0)  # GB/s
    moved = sum(conversion_bytes(prog, k) for k in convs)
    assert ConversionCosts(DEFAULT_TARGET, None).total_ms(prog) == pytest.approx(moved / 1e7)


def test_a_joint_budget_below_two_is_refused(tmp_path):
    with pytest.raises(TuneError, match="too small"):
        joint_tune(small_gmm(), LayoutBook(), "gmm", DEFAULT_TARGET, tmp_path, 1)


def test_a_result_is_a_tuned_step_with_its_layout_first():
    best = Candidate("nkn", (("m", 16), ("n", 16)))
    step = JointResult("gmm", best, 0.5, [[], []], measurements=6).step()
    assert step == Step.make("tuned", "gmm", "tuned", stage="joint+loop",
                             layouts=[{"kind": "layout", "tensor": "gmm", "preset": "nkn", "params": {"m": 16, "n": 16}}],
                             trace=[[], []], latency_ms=0.5, measurements=6)
    assert list(step.to_json()) == ["kind", "op", "stage", "layouts", "trace", "latency_ms", "measurements"]
    assert JointResult("gmm", Candidate(None), 0.5, [[], []]).step().get("layouts") == []


def test_model_guided_pick_prefers_what_the_cost_model_predicts_fastest():
    """With enough scores the XGBoost model picks among unscored candidates; one that looks like
    the fastest scored candidates should be preferred over one like the slowest."""
    fast = [Candidate("alt_tiled", (("tiles", (4, 16)), ("ot", 16), ("it", 3))),
            Candidate("alt_tiled", (("tiles", (4, 8)), ("ot", 16), ("it", 3))),
            Candidate("alt_tiled", (("tiles", (8, 16)), ("ot", 16), ("it", 3)))]
    slow = [Candidate("alt_tiled", (("tiles", (1, 1)), ("ot", 1), ("it", 1))),
            Candidate("alt_tiled", (("tiles", (1, 2)), ("ot", 1), ("it", 1)))]
    scored = {fast[0]: 1.0, fast[1]: 1.1, slow[0]: 50.0, slow[1]: 45.0}
    space = list(scored) + [fast[2], Candidate("alt_tiled", (("tiles", (2, 1)), ("ot", 1), ("it", 1)))]
    picks = {_pick(space, scored, random.Random(seed), "model", 8) for seed in range(10)}
    assert fast[2] in picks
    assert all(p not in scored for p in picks)
