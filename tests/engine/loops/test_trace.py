"""Schedules as traces: plain JSON that replays to the same kernel, a trace refused by another
kernel, and the trace of a schedule that changes nothing."""

from __future__ import annotations

import json

import pytest
import tvm

from tests.engine.loops.kernels import FULL_MATMUL, KERNELS
from workbench.engine.base.errors import LoopError
from workbench.engine.loops.apply import apply_steps
from workbench.engine.loops.nest import script
from workbench.engine.loops.trace import apply_trace_json, empty_schedule, trace_json


def test_trace_json_is_plain_json_and_replays_like_the_steps():
    sch = apply_steps(KERNELS["mm"].func, FULL_MATMUL)
    saved = trace_json(sch)
    assert json.loads(json.dumps(saved)) == saved
    assert saved[0][0][0] == "GetSBlock"  # the same form MetaSchedule records hold
    replayed = apply_trace_json(KERNELS["mm"].func, saved)
    tvm.ir.assert_structural_equal(replayed.mod, sch.mod)
    assert trace_json(replayed) == saved
    assert script(apply_trace_json(KERNELS["mm"].func, sch.trace.as_json())) == script(sch)


def test_a_trace_of_another_kernel_is_a_loop_error():
    with pytest.raises(LoopError, match="does not apply to this kernel"):
        apply_trace_json(KERNELS["chain"].func, trace_json(apply_steps(KERNELS["mm"].func, FULL_MATMUL)))


def test_empty_schedule_changes_nothing_but_has_a_trace():
    func = KERNELS["chain"].func
    sch = empty_schedule(func)
    assert script(sch) == script(func)
    assert [inst.kind.name for inst in sch.trace.insts] == ["GetSBlock"]
    assert script(apply_trace_json(func, trace_json(sch))) == script(func)
