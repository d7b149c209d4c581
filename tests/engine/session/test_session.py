"""Sessions: actions, undo/redo, validation messages, atomic saving, safe names."""

import json
import os
import re
from pathlib import Path

import pytest

from workbench.engine.session import session as S
from workbench.engine.base.errors import SessionError
from workbench.engine.base.step import Step

SPLIT = Step.make("layout", "conv", "split", dim=1, factors=[4, 16])
LOOP = Step.make("loop", "conv", "parallel", block="conv", loop="i1")


def start(*args, **kw) -> S.State:
    return S.replay(S.new_session(*args, **kw))


def test_push_undo_redo():
    s0 = start()
    s2 = s0.push(SPLIT).push(LOOP)
    assert [a.kind for a in s2.session.steps] == ["layout", "loop"]
    s1 = s2.undo()
    assert s1.session.steps == (SPLIT,) and s1.session.redo_stack == (LOOP,)
    assert s1.redo().session == s2.session
    assert s1.redo().scheduled_func("conv").script() == s2.scheduled_func("conv").script()
    with pytest.raises(SessionError, match="nothing to redo"):
        s2.redo()
    with pytest.raises(SessionError, match="nothing to undo"):
        s0.undo()


def test_push_returns_a_new_state_and_leaves_the_old_one():
    s0 = start()
    s1 = s0.push(SPLIT)
    assert s0.session.steps == () and s0.program.plan.layout_of("conv").shape == (1, 64, 112, 112)
    assert s1.program.plan.layout_of("conv").shape == (1, 4, 16, 112, 112)
    s2 = s1.push(LOOP)
    assert s1.kernel_schedule("conv").kind == "default" and s2.kernel_schedule("conv").kind == "loop steps"
    assert s2.program is s1.program  # a loop step keeps the unscheduled program


def test_layout_action_changes_the_plan_and_loop_action_the_kernel():
    st = start().push(SPLIT).push(LOOP)
    assert st.program.plan.layout_of("conv").shape == (1, 4, 16, 112, 112)
    assert "T.parallel(4)" in st.scheduled_func("conv").script()
    assert st.scheduled_program().build().verify().ok


def test_refused_action_leaves_the_session_as_it_was():
    s = start().push(SPLIT)
    bad = Step.make("layout", "conv", "split", dim=1, factors=[3, 2])
    with pytest.raises(SessionError, match=r"action 1 \(layout on 'conv'\): split factors \[3, 2\]"):
        s.push(bad)
    assert s.session.steps == (SPLIT,)
    with pytest.raises(SessionError, match="expected a Step, got dict"):
        s.push(SPLIT.to_json())


def test_replay_applies_each_step_once(monkeypatch):
    calls = []
    real = S.State._apply
    monkeypatch.setattr(S.State, "_apply", lambda self, step: calls.append(step) or real(self, step))
    state = start().push(SPLIT).push(LOOP)
    assert calls == [SPLIT, LOOP]  # a hand step applies that step only
    calls.clear()
    S.loads_state(S.dumps(state))
    assert calls == [SPLIT, LOOP]  # opening a file replays once


def test_round_trip_through_json(tmp_path):
    st = start("gmm", name="g", m=64, n=64, k=64).push(Step.make("preset", "gmm", "nkn", m=16, n=16))
    p = S.save(st.session, tmp_path / "g.json")
    s = st.pinned().session  # what the file holds: the steps, and every other kernel's schedule pinned
    assert s.pins and S.load(p) == s and S.load(p).key() == s.key()


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d.update(version=7), 'unsupported version 7'),
    (lambda d: d.update(target={}), 'field "target": needs a "kind"'),
    (lambda d: d.update(model={"zoo": "gmm", "bogus": 1}), "unknown model option 'bogus' for gmm"),
    (lambda d: d["actions"].append({"kind": "layout", "tensor": "conv", "primitive": "split", "args": [1]}),
     'field "args" must be an object'),
    (lambda d: d["actions"].append({**SPLIT.to_json(), "extra": 1}), 'unknown field "extra"'),
])
def test_loads_names_the_bad_field(mutate, fragment):
    d = S.new_session().to_json()
    mutate(d)
    with pytest.raises(SessionError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        S.loads(json.dumps(d))


LOOP2 = Step.make("loop", "conv", "vectorize", block="conv", loop="i4")


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d.update(name=5), 'field "name" must be a str'),
    (lambda d: d.update(actions={}), 'field "actions" must be a list'),
    (lambda d: d["actions"].append(7), "action 2: must be an object"),
    (lambda d: d["actions"].append({"kind": "loop", "primitive": "parallel", "args": {}}),
     'action 2 (loop): missing field "op"'),
    (lambda d: d["actions"].append({"kind": "layout", "tensor": 5, "primitive": "split", "args": {}}),
     'action 2 (layout): field "tensor" must be a string'),
    (lambda d: d["actions"].append({"kind": "tuned", "op": "conv"}), 'action 2 (tuned): missing field "trace"'),
    (lambda d: d["actions"].append({"kind": "loop", "op": "conv", "primitive": "parallel",
                                    "args": {"block": "conv", "loop": "nope"}}),
     "action 2 (loop on 'conv'): step 1: parallel(block='conv', loop='nope'): block 'conv' has no loop 'nope'"),
    (lambda d: d["actions"].insert(0, {**SPLIT.to_json(), "args": {"dim": 9, "factors": [4, 16]}}),
     "action 0 (layout on 'conv')"),
])
def test_loads_names_the_action_index_and_field(mutate, fragment):
    d = start().push(SPLIT).push(LOOP).session.to_json()
    mutate(d)
    with pytest.raises(SessionError) as e:
        S.loads(json.dumps(d))
    assert fragment in str(e.value)


def test_round_trip_keeps_every_action_kind(tmp_path):
    st = start().push(SPLIT).push(LOOP).push(LOOP2)
    from workbench.engine.loops.primitives import trace_json

    trace = trace_json(st.tvm_schedule("conv"))
    s = st.push(Step.make("tuned", "conv", "tuned", trace=trace, latency_ms=1.5, layouts=[
        {"kind": "layout", "tensor": "conv", "preset": "blocked", "params": {"factor": 16}}])).pinned().session
    path = S.save(s, S.safe_path(tmp_path, s.name))
    back = S.load(path)
    assert back == s and S.dumps(back) == path.read_text()
    assert S.replay(back).scheduled_func("conv").script() == S.replay(s).scheduled_func("conv").script()


def test_example_sessions_are_stored_as_saved():
    from pathlib import Path

    for p in sorted((Path(__file__).resolve().parents[3] / "sessions").glob("*.json")):
        assert S.dumps(S.load(p)) == p.read_text(), p.name


def test_save_is_atomic_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    S.save(S.new_session(), path)
    before = path.read_bytes()

    real_fdopen = os.fdopen

    class Half:  # the text is half written, then the disk fills up
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def write(self, text):
            self.f.write(text[: len(text) // 2])
            self.f.flush()
            raise OSError("No space left on device")

    monkeypatch.setattr(os, "fdopen", lambda fd, mode: Half(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match="No space left"):
        S.save(start().push(SPLIT).session, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    S.save(S.new_session(), path)
    before = path.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        S.save(start().push(SPLIT).session, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary file left


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "", ".hidden", "x" * 100])
def test_safe_path_refuses_names_that_escape(name, tmp_path):
    with pytest.raises(SessionError, match="invalid session name"):
        S.safe_path(tmp_path, name)


def test_safe_path_accepts_plain_names(tmp_path):
    assert S.safe_path(tmp_path, "r18_stem-v2.1") == tmp_path / "r18_stem-v2.1.json"


########## Pinned schedules (issue #42) ##########

DATA = Path(__file__).resolve().parents[2] / "data"
TILED = Step.make("preset", "conv", "alt_tiled")


def kernels(state: S.State) -> dict[str, str]:
    """Every kernel of the state after its schedule, as TIR text."""
    return {k: state.scheduled_func(k).script() for k in state.program.funcs}


def old_format(text: str) -> str:
    """A saved session as version 1 wrote it: no pins."""
    d = json.loads(text)
    del d["pinned"]
    return json.dumps({**d, "version": 1})


def test_a_saved_session_replays_to_the_same_kernels_after_a_heuristic_change(tmp_path, monkeypatch):
    from workbench.engine.schedules import builder
    from workbench.engine.schedules.conversion import steps as convert

    state = start("r18_stem").push(TILED)
    path = S.save(state, tmp_path / "s.json")
    assert S.load_state(path).kernel_schedule("convert_relu_out").kind == "conversion"
    before = kernels(S.load_state(path))
    old = tmp_path / "old.json"
    old.write_text(old_format(path.read_text()))
    assert kernels(S.load_state(old)) == before
    # the conversions' parallel chunks per core: a heuristic constant of the analytic schedule
    holder = next(m for m in (builder, convert) if hasattr(m, "_CHUNKS_PER_CORE"))
    monkeypatch.setattr(holder, "_CHUNKS_PER_CORE", 64)
    assert kernels(S.load_state(path)) == before
    unpinned = kernels(S.load_state(old))
    assert [k for k in before if unpinned[k] != before[k]] == ["convert_relu_out"]  # what the pin holds


def test_the_file_pins_every_kernel_the_actions_leave_unscheduled(tmp_path):
    state = start("r18_stem").push(TILED).push(Step.make("loop", "pad", "parallel", block="pad", loop="i1"))
    d = json.loads(S.dumps(state))
    assert d["version"] == S.VERSION == 2
    assert {p["op"]: p["schedule"] for p in d["pinned"]} == {"conv": "default", "convert_relu_out": "conversion"}
    conversion = next(p for p in d["pinned"] if p["op"] == "convert_relu_out")
    assert [s["primitive"] for s in conversion["steps"]] == [
        s.primitive for s in state.kernel_schedule("convert_relu_out").steps] and "parallel" in str(conversion["steps"])
    assert "steps" not in next(p for p in d["pinned"] if p["op"] == "conv")


@pytest.mark.parametrize("path", sorted((DATA / "v1_sessions").glob("*.json")), ids=lambda p: p.stem)
def test_an_old_format_session_opens_and_is_pinned_at_its_next_save(path, tmp_path):
    text = path.read_text()
    assert json.loads(text)["version"] == 1 and "pinned" not in json.loads(text)
    state = S.loads_state(text)
    assert state.session.pins == ()
    saved = S.save(state, tmp_path / path.name)
    d = json.loads(saved.read_text())
    assert d["version"] == 2 and d["actions"] == json.loads(text)["actions"]
    assert {p["op"] for p in d["pinned"]} == {k for k in state.program.funcs if k not in state.schedules}
    assert kernels(S.load_state(saved)) == kernels(state)


@pytest.mark.parametrize("pinned, fragment", [
    ({}, 'field "pinned" must be a list, got dict'),
    ([5], 'field "pinned": entry 0: must be an object, got int'),
    ([{"op": "conv", "kernel_hash": "0", "schedule": "tuned"}], 'field "schedule" must be one of'),
    ([{"op": "conv", "kernel_hash": "0", "schedule": "default", "extra": 1}], 'unknown field "extra"'),
    ([{"op": "conv", "schedule": "default"}], 'field "kernel_hash" must be a string'),
    ([{"op": "pad", "kernel_hash": "0", "schedule": "conversion", "steps": [{"primitive": "split"}]}],
     'field "pinned": entry 0: step 0 (loop): missing field "args"'),
])
def test_a_bad_pin_is_refused_naming_it(pinned, fragment):
    d = {**S.new_session().to_json(), "pinned": pinned}
    with pytest.raises(SessionError, match=re.escape(fragment)):
        S.loads(json.dumps(d))


def test_a_pin_that_does_not_apply_is_refused_naming_it(tmp_path):
    d = json.loads(S.dumps(start("r18_stem").push(TILED)))
    pin = next(p for p in d["pinned"] if p["op"] == "convert_relu_out")
    pin["steps"][0]["args"]["block"] = "nope"
    with pytest.raises(SessionError, match=re.escape('field "pinned": entry 2 (convert_relu_out): ')):
        S.loads(json.dumps(d))


########## A push applies one step (issue #42) ##########

def _counting(monkeypatch) -> dict[str, int]:
    """How many loop primitives the pushes apply one at a time (``one``) and in full replays of a
    kernel's steps (``replayed``), from now on."""
    from workbench.engine.schedules import policy

    counts = {"one": 0, "replayed": 0}
    one, many = S.apply_step, policy.apply_steps

    def apply_step(sch, step):
        counts["one"] += 1
        return one(sch, step)

    def apply_steps(func, steps):
        counts["replayed"] += len(steps)
        return many(func, steps)

    monkeypatch.setattr(S, "apply_step", apply_step)
    monkeypatch.setattr(policy, "apply_steps", apply_steps)
    return counts


def _same_kernels(a: S.State, b: S.State) -> None:
    """Both states build the same TIR for every kernel, with the same traces."""
    import tvm_ffi

    assert a.program.funcs.keys() == b.program.funcs.keys()
    for k in a.program.funcs:
        assert tvm_ffi.structural_equal(a.scheduled_func(k), b.scheduled_func(k)), k
        assert a.scheduled_func(k).script() == b.scheduled_func(k).script(), k
    for k in a.schedules:
        assert str(a.tvm_schedule(k).trace) == str(b.tvm_schedule(k).trace), k


def _edits(state: S.State) -> list[Step]:
    """Three loop steps the tuned conv kernel accepts, one after the other."""
    from workbench.engine.loops.args import default_arguments

    steps = []
    for prim in ("reorder", "unroll", "parallel"):
        steps.append(Step.make("loop", "conv", prim, **default_arguments(state.scheduled_func("conv"), prim)))
        state = state.push(steps[-1])
    return steps


@pytest.mark.parametrize("tuned", [False, True], ids=["hand steps", "a tuned trace edited"])
def test_a_push_applies_its_one_step_and_builds_what_a_full_replay_builds(monkeypatch, tuned):
    from tests.tuned import tuned_step

    state = start().push(SPLIT)
    if tuned:
        state = start().push(tuned_step())
        steps = _edits(state)
    else:
        steps = [LOOP, Step.make("loop", "conv", "split", block="conv", loop="i3", factors=[-1, 16]),
                 Step.make("loop", "conv", "reorder", block="conv", loops=["i3_1", "i4"])]
    state.scheduled_program()  # the other kernels' schedules (conversions), kept by every push below
    counts = _counting(monkeypatch)
    for i, step in enumerate(steps, 1):
        state = state.push(step)
        assert counts == {"one": i, "replayed": 0}, (step, counts)  # nothing before it applied again
        state.scheduled_program()  # the pages' and build's questions apply nothing either
        assert counts == {"one": i, "replayed": 0}
    full = S.replay(state.session)
    assert counts == {"one": 2 * len(steps), "replayed": 0}  # a replay, too, applies each step once
    _same_kernels(state, full)
    assert state.scheduled_program().build().verify().ok


def test_a_push_on_a_schedule_never_applied_replays_the_kernel_once(monkeypatch):
    done = start().push(SPLIT).push(LOOP)
    step = Step.make("loop", "conv", "split", block="conv", loop="i3", factors=[-1, 16])
    bare = S.State(done.session, done.graph, done.book, dict(done.schedules))  # no memo: as a state built by hand
    counts = _counting(monkeypatch)
    pushed = bare.push(step)
    assert counts == {"one": 0, "replayed": 2}  # the kernel's two steps, once
    again = done.push(step)
    assert counts == {"one": 1, "replayed": 2}  # a state that applied them pushes the one step
    _same_kernels(pushed, again)

