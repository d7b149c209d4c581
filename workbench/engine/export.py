"""Export a session as a MetaSchedule tuning record that plain TVM can apply.

Each kernel becomes one workload (its layout-transformed PrimFunc as ``IRModule({"main":
func})``, the form ``ms.tir_integration.compile_tir`` looks up) with its schedule's trace as
the record: the tuned trace, the trace of the hand loop steps, or an empty trace, with the
kernel's latency measured at export (MetaSchedule ignores records without one). The folder
also holds the session and ``manifest.json`` (target, TVM version, kernels in execution order
with their buffers and layouts), so a user can wire the kernels without this project.
"""

from __future__ import annotations

import json
from pathlib import Path

import tvm
import tvm_ffi
import tvm.s_tir.meta_schedule as ms
from tvm import s_tir

from .loops import apply_steps, apply_trace_json, list_blocks
from .session import Session, dumps, replay

__all__ = ["export_session"]


def export_session(session: Session, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("database_workload.json", "database_tuning_record.json"):
        (out / name).unlink(missing_ok=True)  # a fresh database, not an append to an old one
    state = replay(session)
    plan, target = state.program.plan, tvm.target.Target(dict(session.target))
    db = ms.database.JSONDatabase(path_workload=str(out / "database_workload.json"),
                                  path_tuning_record=str(out / "database_tuning_record.json"))
    # MetaSchedule only applies records with measured run times: measure the final kernels
    timings = {t.name: t.latency_ms for t in state.scheduled_program().build(session.target).time(repeat=3, min_ms=5)}
    kernels = []
    for k in plan.kernels:
        func = state.program.funcs[k.name]
        mod = tvm.IRModule({"main": func})
        if k.name in state.traces:
            sch = apply_trace_json(func, state.traces[k.name])
        elif state.steps.get(k.name):
            sch = apply_steps(func, state.steps[k.name])
        else:  # MetaSchedule skips records with an empty trace: look the first block up
            sch = s_tir.Schedule(mod)
            sch.get_sblock(list_blocks(sch)[0])
        wl = db.commit_workload(mod)
        db.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, wl, run_secs=[timings[k.name] / 1e3], target=target, args_info=ms.arg_info.ArgInfo.from_prim_func(func)))
        kernels.append({"name": k.name, "latency_ms": timings[k.name], "workload_hash": str(tvm_ffi.structural_hash(mod)),
                        "inputs": list(k.inputs), "outputs": list(k.outputs),
                        "buffers": {b: {"tensor": plan.buffers[b].tensor, "shape": list(plan.buffers[b].layout.shape),
                                        "layout": plan.buffers[b].layout.label,
                                        "primitives": [str(p) for p in plan.buffers[b].layout.prims]}
                                    for b in k.inputs + k.outputs}})
    manifest = {"session": session.name, "target": session.target, "tvm_version": tvm.__version__,
                "model": session.model, "kernels": kernels, "outputs": plan.outputs}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (out / "session.json").write_text(dumps(session))
    return out
