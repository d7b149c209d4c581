"""Job specs: a kernel tuning spec round-trips its PrimFunc; a session spec refuses a bad stage
or budget share in the caller."""

import json

import pytest
import tvm

from workbench.engine.base.errors import TuneError
from workbench.engine.build.targets import DEFAULT_TARGET as TARGET
from workbench.engine.session.session import new_session
from workbench.engine.tuning.jobs.spec import job_spec, session_job_spec, tasks_from_spec
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.rpc import RpcConfig


def test_spec_round_trips_the_primfunc(mm_task):
    options = TuneOptions(rpc=RpcConfig.parse("127.0.0.1:9190:k"), isolated=True)
    spec = json.loads(json.dumps(job_spec([mm_task], TARGET, 8, options)))
    (back,) = tasks_from_spec(spec)
    tvm.ir.assert_structural_equal(back.func, mm_task.func)
    assert (back.name, back.flops, spec["rpc"], spec["isolated"]) == ("mm", mm_task.flops, "127.0.0.1:9190:k", True)
    with pytest.raises(TuneError, match="format"):
        tasks_from_spec({"tasks": []})


def test_a_session_spec_refuses_a_bad_stage_or_share():
    s = new_session("gmm", m=64, n=64, k=64)
    spec = session_job_spec(s, "joint", 8, TuneOptions(joint_fraction=0.5, search="random", seed=None))
    assert (spec["kind"], spec["joint_fraction"], spec["search"], spec["seed"]) == ("session", 0.5, "random", None)
    with pytest.raises(TuneError, match="stage"):
        session_job_spec(s, "both", 8)
    with pytest.raises(TuneError, match="strictly between 0 and 1"):
        session_job_spec(s, "joint", 8, TuneOptions(joint_fraction=1.0))
