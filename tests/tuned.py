"""A tuned kernel for the tests, without a tuner: MetaSchedule's trace of r18_stem's conv kernel
(conv, bias, relu), stored in ``tests/data``. It is the first sample of the kernel's design space
(``post-order-apply``, ``rand_state=0``) after MetaSchedule's postprocessors, so it decomposes the
reduction into ``conv_init`` / ``conv_update`` and inlines ``bias``, as a tuning result does.
``metaschedule_trace`` makes it again (about a minute on two cores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.engine.session.session import State, new_session, replay
from workbench.engine.base.step import Step

TRACE = Path(__file__).resolve().parent / "data" / "r18_stem_conv_tuned_trace.json"


def tuned_step(kernel: str = "conv") -> Step:
    """The tuned action a tuning result applies to r18_stem's conv kernel."""
    return Step.make("tuned", kernel, "tuned", stage="loop", trace=json.loads(TRACE.read_text()), latency_ms=1.0)


def tuned_state() -> State:
    """r18_stem (the default model) with its conv kernel tuned."""
    return replay(new_session()).push(tuned_step())


def metaschedule_trace(state: State, kernel: str = "conv") -> Any:
    """The trace ``TRACE`` holds, made afresh from ``kernel`` of ``state`` (unscheduled)."""
    import tvm
    import tvm.s_tir.meta_schedule as ms

    from workbench.engine.loops.primitives import trace_json
    from workbench.engine.build.targets import target_from

    ctx = ms.TuneContext(mod=tvm.IRModule({"main": state.program.funcs[kernel]}),
                         target=target_from(state.session.target), space_generator="post-order-apply", rand_state=0)
    sch = ctx.generate_design_space()[0]
    sch.enter_postproc()
    for postproc in ctx.space_generator.postprocs:
        assert postproc.apply(sch), type(postproc).__name__
    return trace_json(sch)
