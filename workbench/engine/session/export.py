"""Export a session as a MetaSchedule tuning record that plain TVM can apply.

``export_session(session, out_dir)`` writes a MetaSchedule ``JSONDatabase``:
``database_workload.json`` (one workload per kernel, its layout-transformed, unscheduled
PrimFunc as ``IRModule({"main": func})``, the form ``ms.tir_integration.compile_tir`` and
``Database.query_schedule(mod, target, workload_name="main")`` look up) and
``database_tuning_record.json`` (one record per kernel, its trace the kernel's schedule, with
the kernel's latency measured at export and the target). It also writes ``session.json`` (a
copy of the session) and ``manifest.json``, with which a user can wire the kernels without this
project (``export_session`` says what the records and the manifest hold).
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

import tvm
import tvm.s_tir.meta_schedule as ms
import tvm_ffi

from ..base.errors import BuildError
from ..build.targets import resolve_target, target_from
from .session import Session, dumps, replay

__all__ = ["export_session", "export_zip", "DATABASE_FILES"]

DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")


def export_session(session: Session, out_dir: str | Path, progress: Callable[[str], None] | None = None,
                   timing_repeat: int = 3, timing_min_ms: float = 5.0) -> Path:
    """Write the session's kernels and schedules as a MetaSchedule database in ``out_dir``.

    Each record's trace is the tuned trace, the trace of the hand loop steps
    (``apply_steps(...).trace``), or, for an unscheduled kernel, its empty trace written as a
    single ``GetSBlock`` lookup, which changes nothing: TVM 0.27's ``query_schedule`` ignores
    records whose trace has no instruction at all, and records without a run time (hence the
    latency measured here). ``manifest.json`` holds the target, the TVM version, the model, and
    per kernel (in execution order) its name, latency, schedule kind, workload hash
    (``tvm_ffi.structural_hash`` of the workload module), input and output buffers and, per
    buffer, the tensor it stores, its stored shape, layout label and layout primitives;
    ``outputs`` maps each graph output to the buffer that holds it. Weights must be converted to
    their stored layouts ahead of time, as the manifest says.

    Raises ``SessionError`` and the like when the session does not replay, ``BuildError`` when
    a kernel does not build; nothing is written then. Returns ``out_dir`` as a Path.
    """
    say = progress or (lambda _: None)
    say("replaying actions")
    state = replay(session)
    plan, target = state.program.plan, target_from(session.target)
    say("building and timing the final kernels")
    # MetaSchedule only applies records with measured run times: measure the final kernels
    built = state.scheduled_program().build(session.target)
    timings = {t.name: t for t in built.time(repeat=timing_repeat, min_ms=timing_min_ms,
                                             progress=lambda k: say(f"timing {k}"))}
    records, kernels = [], []
    for k in plan.kernels:
        func = state.program.funcs[k.name]
        mod = tvm.IRModule({"main": func})
        sch, kind = state.tvm_schedule(k.name), state.kernel_schedule(k.name).kind
        records.append((mod, sch.trace, func, timings[k.name].latency_ms))
        kernels.append({
            "name": k.name, "latency_ms": timings[k.name].latency_ms, "schedule": kind,
            "workload_hash": str(tvm_ffi.structural_hash(mod)),
            "inputs": list(k.inputs), "outputs": list(k.outputs),
            "buffers": {b: {"tensor": plan.buffers[b].tensor, "source": plan.buffers[b].source,
                            "shape": [int(x) for x in plan.buffers[b].layout.shape],
                            "layout": plan.buffers[b].layout.label,
                            "primitives": [str(p) for p in plan.buffers[b].layout.prims]}
                        for b in k.inputs + k.outputs}})

    say("writing the database")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in DATABASE_FILES:
        (out / name).unlink(missing_ok=True)  # a fresh database, not an append to an old one
    db = ms.database.JSONDatabase(path_workload=str(out / DATABASE_FILES[0]),
                                  path_tuning_record=str(out / DATABASE_FILES[1]))
    try:
        for mod, trace, func, latency_ms in records:
            wl = db.commit_workload(mod)
            db.commit_tuning_record(ms.database.TuningRecord(
                trace, wl, run_secs=[latency_ms / 1e3], target=target,
                args_info=ms.arg_info.ArgInfo.from_prim_func(func)))
    except Exception as e:  # noqa: BLE001
        raise BuildError(f"could not write the MetaSchedule database: {str(e).splitlines()[0]}") from None
    # the target the kernels were built and timed for (an llvm target without mcpu means this CPU)
    manifest = {"session": session.name, "target": resolve_target(session.target),
                "session_target": dict(session.target), "tvm_version": tvm.__version__,
                "model": dict(session.model), "database": list(DATABASE_FILES), "kernels": kernels,
                "outputs": dict(plan.outputs)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (out / "session.json").write_text(dumps(state))
    return out


def export_zip(session: Session, progress: Callable[[str], None] | None = None) -> bytes:
    """``export_session`` into a temporary folder, returned as the bytes of a zip whose entries
    sit under the session's name (what the app offers for download)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = export_session(session, Path(tmp) / session.name, progress)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(out.rglob("*")):
                if f.is_file():
                    z.write(f, f.relative_to(out.parent))
    return buf.getvalue()
