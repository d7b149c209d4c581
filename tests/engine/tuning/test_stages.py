"""Session-level tuning: results become replayable ``tuned`` steps; bad requests are refused."""

import json

import pytest

from workbench.engine.base.errors import SessionError, TuneError
from workbench.engine.session.session import dumps, loads, new_session, replay
from workbench.engine.base.step import Step
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.stages import tune_session


@pytest.fixture
def gmm_session():
    return new_session("gmm", m=64, n=64, k=64)


def test_tune_session_appends_replayable_tuned_steps(tmp_path, gmm_session):
    tuned = tune_session(gmm_session, "loop", 3, tmp_path, TuneOptions(keep_faster=False))
    assert tuned.steps and {s.kind for s in tuned.steps} == {"tuned"}
    assert tuned.steps[0].get("stage") == "loop" and tuned.steps[0].get("measurements") == 3
    again = loads(dumps(tuned))  # a replay needs no tuning
    assert replay(again).scheduled_program().build().verify().ok
    assert json.loads(dumps(again))["actions"][0]["trace"]


def test_bad_stage_and_budget_are_refused(tmp_path, gmm_session):
    with pytest.raises(TuneError, match="stage"):
        tune_session(gmm_session, "both", 4, tmp_path)
    with pytest.raises(TuneError, match="budget"):
        tune_session(gmm_session, "loop", 0, tmp_path)
    with pytest.raises(TuneError, match="at least 2 \\(two each\\)"):
        tune_session(gmm_session, "joint", 1, tmp_path)


def test_a_tuned_step_with_a_foreign_trace_is_refused(gmm_session):
    with pytest.raises(SessionError, match="action 0"):
        replay(gmm_session).push(Step.make("tuned", "nope", "tuned", trace=[[], []]))


def _twin_convs(path):
    """Two alike branches of x, conv -> relu each (8 -> 8 channels, 3x3, pad 1), as ONNX: under
    any layout the tuner picks, their kernels stay equal (both read x and write a graph output)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(0)
    ws = [numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype("float32"), f"w{i}") for i in (1, 2)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["y1"]),
             helper.make_node("Conv", ["x", "w2"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y2"])]
    out = [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 8, 10, 10]) for y in ("y1", "y2")]
    graph = helper.make_graph(nodes, "twins", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])],
                              out, ws)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_ops_with_equal_kernels_are_tuned_once_and_share_the_result(tmp_path):
    from workbench.engine.models import zoo
    from workbench.engine.tuning.stages import joint_shares, twin_groups

    spec, _ = zoo.file_model(str(_twin_convs(tmp_path / "twins.onnx")))
    session = new_session(spec)
    state = replay(session)
    (group,) = twin_groups(state)
    assert len(group) == 2
    (share,) = joint_shares(state, 4)
    assert share.op == group[0] and share.twins == (group[1],) and share.budget == 4
    tuned = tune_session(session, "joint", 4, tmp_path / "wd", TuneOptions(keep_faster=False))
    steps = [s for s in tuned.steps if s.kind == "tuned"]
    assert [s.target for s in steps] == group
    assert steps[1].get("measurements") == 0 and steps[1].get("stage") == f"joint+loop (from {group[0]})"
    mine, theirs = steps[0].get("trace"), steps[1].get("trace")  # the same, found by the twin's block names
    assert len(mine[0]) == len(theirs[0]) and mine != theirs and group[0] not in str(theirs)
    done = replay(loads(dumps(tuned)))
    assert all(done.kernel_schedule(done.home_kernel(op)).kind == "tuned" for op in group)
    assert done.scheduled_program().build().verify().ok


def _pool_convs(path):
    """x -> max pool (3, stride 2, pad 1) -> conv 3x3 pad 1 -> relu -> conv 3x3 pad 1 -> relu, as
    ONNX: ResNet-18's stem in small, where a tiled conv input is written by the pool or by the
    previous conv's epilogue, zero halo included."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(1)
    ws = [numpy_helper.from_array(rng.standard_normal((16, c, 3, 3)).astype("float32"), f"w{i}")
          for i, c in ((1, 8), (2, 16))]
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p", "w1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "w2"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "pool_convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 18, 18])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 9, 9])], ws)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_network_tuned_jointly_computes_what_it_computed_before(tmp_path):
    from workbench.engine.models import zoo

    spec, _ = zoo.file_model(str(_pool_convs(tmp_path / "pool_convs.onnx")))
    session = new_session(spec)
    tuned = tune_session(session, "joint", 6, tmp_path / "wd")
    done = replay(loads(dumps(tuned)))
    unscheduled = [k.name for k in done.program.plan.kernels
                   if k.ops and done.kernel_schedule(k.name).kind == "default"]
    assert not unscheduled  # complex kernels tuned or expert-scheduled, the pool on its analytic schedule
    result = done.scheduled_program().build().verify()
    assert result.ok, result


def test_a_schedule_with_wrong_results_is_not_used_and_the_next_one_is(tmp_path):
    """TVM's reverse_compute_at of an epilogue that writes a zero halo drops the halo's border
    (it reads no tile): a kernel that forgets outputs. Such a schedule is refused with a warning
    and the next way (here the expert schedule) is taken."""
    from workbench.engine.base.errors import TuneWarning
    from workbench.engine.tuning.apply import expert_attempt as _expert, first_correct as _first_correct

    state = replay(new_session("r18_block"))
    state = state.push(Step.make("preset", "conv2", "alt_tiled", tiles=[56, 56], ot=16, it=16))
    kernel = state.home_kernel("conv1")
    good = _expert("conv1")(state)
    steps = list(good.session.steps[len(state.session.steps):])
    at = next(i for i, s in enumerate(steps) if s.primitive == "reverse_compute_at")
    wrong = [s for s in steps if s.get("block") != "relu1"]  # the epilogue joins the tile instead
    wrong.insert(at + 1, steps[at].with_args(block="relu1") if hasattr(steps[at], "with_args") else
                 Step.make("loop", kernel, "reverse_compute_at", **{**steps[at].kwargs, "block": "relu1"}))

    def bad(s):
        for step in wrong:
            s = s.push(step)
        return s

    with pytest.warns(TuneWarning, match=f"kernel {kernel}: the tuned schedule gives wrong results \\(output 0 differs"):
        chosen = _first_correct(state, "conv1", {"expert": _expert("conv1"), "tuned": bad})  # tuned first
    assert chosen.session.steps == good.session.steps
    assert chosen.scheduled_program().build().verify().ok


def test_the_joint_budget_goes_where_the_network_loses_time():
    """mv2_block: the depthwise conv has the fewest FLOPs; when it is the kernel that loses time
    it gets the largest share (``split="loss"``), under a FLOPs split the smallest."""
    from pathlib import Path

    from workbench.engine.session.session import load
    from workbench.engine.tuning.stages import joint_shares, seed_times

    state = replay(load(Path(__file__).resolve().parents[3] / "sessions" / "mv2_block.json"))
    kernels = {op: state.home_kernel(op) for op in ("expand", "dw", "project")}
    slow_dw = {kernels["expand"]: 0.02, kernels["dw"]: 0.05, kernels["project"]: 0.02}
    by_flops = {s.op: s.budget for s in joint_shares(state, 40, TuneOptions(split="flops"), slow_dw)}
    by_loss = {s.op: s.budget for s in joint_shares(state, 40, TuneOptions(split="loss"), slow_dw)}
    assert by_flops["dw"] < min(by_flops["expand"], by_flops["project"])
    assert by_loss["dw"] > max(by_loss["expand"], by_loss["project"])
    assert sum(by_loss.values()) == sum(by_flops.values())
    # without a time for every kernel the split falls back to FLOPs
    partial = joint_shares(state, 40, TuneOptions(split="loss"), {kernels["dw"]: 0.05})
    assert {s.op: s.budget for s in partial} == by_flops
    times = seed_times(state)  # the expert network, timed: every complex kernel has a time
    assert all(times[k] > 0 for k in kernels.values())
