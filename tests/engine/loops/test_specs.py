"""The loop primitives' specs: TVM's names and arguments; a loop step hashes and survives JSON."""

from __future__ import annotations

import json

import pytest
from tvm import s_tir

from workbench.engine.base.errors import SessionError
from workbench.engine.base.step import Step
from workbench.engine.loops.specs import PRIMITIVES, loop_step

S = loop_step


def test_every_primitive_is_named_and_taken_as_tvm_names_and_takes_it():
    assert set(PRIMITIVES) == {
        "split", "loop_partition", "reorder", "fuse", "vectorize", "unroll", "parallel", "cache_read", "cache_write", "compute_at",
        "reverse_compute_at", "compute_inline", "reverse_compute_inline", "decompose_reduction", "transform_layout"}
    for name, spec in PRIMITIVES.items():
        assert callable(getattr(s_tir.Schedule, name))
        kinds = {"block", "loop", "loops", "int", "ints", "str", "written", "written_factors", "written_perm"}
        assert spec.doc and set(spec.args.values()) <= kinds
        assert {a.lstrip("*") for a in spec.tvm_args} <= set(spec.args)
        assert set(spec.defaults) <= set(spec.args) and spec.loop_of in spec.args
    assert PRIMITIVES["compute_at"].loop_of == "target_block"
    assert PRIMITIVES["split"].args == {"block": "block", "loop": "loop", "factors": "ints"}


def test_loop_step_hashes_and_round_trips_through_json():
    a = S("split", factors=[None, 8], loop="i", block="C")
    b = Step.from_json(json.loads(json.dumps(a.to_json())))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.args == (("block", "C"), ("loop", "i"), ("factors", (None, 8)))
    assert a.to_json() == {"kind": "loop", "op": "", "primitive": "split",
                           "args": {"block": "C", "loop": "i", "factors": [None, 8]}}
    assert str(a) == "split(block='C', loop='i', factors=[None, 8])"
    assert S("cache_read", block="C", read_index=0) == S("cache_read", block="C", read_index=0, scope="global")


def test_a_step_without_its_kind_is_a_session_error():
    with pytest.raises(SessionError, match='action 0: field "kind" must be one of'):
        Step.from_json({"args": {}})
