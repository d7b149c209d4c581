"""What a job does, written to its folder's ``spec.json`` before it starts: tune kernels
(``job_spec``), tune a whole session (``session_job_spec``: a stage of ``stages.tune_network``),
replay a session (``replay_job_spec``) or time a tuning's result against its baselines
(``baselines_job_spec``). ``check_spec`` refuses a bad one in the caller, not in the worker's log.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

from ...base.errors import TuneError, WorkbenchError

if TYPE_CHECKING:  # the worker imports TVM only once it has a slot
    from ..options import TuneOptions
    from ..records import TuneTask
    from ..rpc import RpcConfig

__all__ = ["SPEC_FORMAT", "KINDS", "job_spec", "session_job_spec", "replay_job_spec", "baselines_job_spec",
           "tasks_from_spec", "session_from_spec", "rpc_of", "check_spec", "kind_of"]

SPEC_FORMAT = "alt-workbench-tune-job"
#: spec kind -> what the user calls it
KINDS = {"tasks": "tuning", "session": "tuning", "replay": "replay", "baselines": "baselines"}


def job_spec(tasks: Sequence[TuneTask], target: dict, budget: int, options: TuneOptions | None = None, *,
             stage: str = "loop", layout_label: str | None = None) -> dict:
    """A JSON-able description of a ``tune_loops`` job (of the options, those a job uses:
    ``rpc``, ``num_trials_per_iter``, ``seed`` and ``isolated``)."""
    import tvm

    from ..options import TuneOptions

    options = options or TuneOptions()
    return {"format": SPEC_FORMAT, "version": 1,
            "tasks": [{"name": t.name, "func": tvm.ir.save_json(t.func), "flops": int(t.flops)} for t in tasks],
            "target": dict(target), "budget": int(budget), "stage": stage, "rpc": _rpc_text(options),
            "num_trials_per_iter": int(options.num_trials_per_iter), "layout_label": layout_label,
            "seed": options.seed, "isolated": bool(options.isolated)}


def session_job_spec(session: Any, stage: str, budget: int, options: TuneOptions | None = None, *,
                     baselines: bool = True) -> dict:
    """A job that runs ``stages.tune_session`` on ``session`` (a ``session.Session``; of the
    options, those a job uses: ``rpc``, ``joint_fraction``, ``search``, ``seed`` and ``keep_faster``)
    and, with ``baselines``, times its tuned kernels against their baselines (``baselines``)."""
    from ..options import TuneOptions
    from ..stages import STAGES

    options = options or TuneOptions()
    if stage not in STAGES:
        raise TuneError(f"stage must be one of {STAGES}, got {stage!r}")
    if int(budget) < 1:
        raise TuneError(f"budget must be a positive number of measurements, got {budget}")
    fraction = options.joint_fraction
    if not 0.0 < float(fraction) < 1.0:
        raise TuneError(f"the joint stage's share of the budget must lie strictly between 0 and 1, got {fraction}")
    return {"format": SPEC_FORMAT, "version": 1, "kind": "session", "session": session.to_json(), "stage": stage,
            "budget": int(budget), "rpc": _rpc_text(options), "joint_fraction": float(fraction),
            "search": options.search, "seed": options.seed, "keep_faster": bool(options.keep_faster),
            "baselines": bool(baselines)}


def replay_job_spec(session: Any, target: dict | None = None) -> dict:
    """A job that runs ``replay.replay_to`` on ``session`` (a ``session.Session``), writing the
    kernels to ``job_dir/out``; ``target`` replaces the session's."""
    return {"format": SPEC_FORMAT, "version": 1, "kind": "replay", "session": session.to_json(),
            "target": None if target is None else dict(target)}


def baselines_job_spec(job: Any) -> dict:
    """A job that times the result of session tuning ``job`` (a ``handle.Job``: finished, or its
    best so far) against its baselines, into the folder ``job.dir / "baselines"``."""
    return {"format": SPEC_FORMAT, "version": 1, "kind": "baselines", "of": str(job.dir), "started": job.started}


def _rpc_text(options: TuneOptions) -> str | None:
    return None if options.rpc is None else str(options.rpc)


def session_from_spec(spec: dict) -> Any:
    """The spec's session, its structure checked: ``start_job`` replayed it in the caller
    (``check_spec``), and whatever uses it replays it once more, so a second replay here is waste."""
    from ...session.session import parse

    return parse(json.dumps(spec.get("session")))


def tasks_from_spec(spec: dict) -> list[TuneTask]:
    """The spec's tasks with their PrimFuncs loaded back."""
    import tvm

    from ..records import TuneTask

    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        raise TuneError(f"not a tuning job spec (format must be {SPEC_FORMAT!r})")
    for key in ("tasks", "target", "budget"):
        if key not in spec:
            raise TuneError(f"the tuning job spec has no {key!r}")
    tasks = []
    for i, t in enumerate(spec["tasks"]):
        try:
            func = tvm.ir.load_json(t["func"])
            tasks.append(TuneTask(t["name"], func, int(t["flops"])))
        except WorkbenchError:
            raise
        except Exception as e:
            raise TuneError(f"task {i} of the job spec cannot be loaded: {type(e).__name__}: {e}") from None
    return tasks


def rpc_of(spec: dict) -> RpcConfig | None:
    """The spec's RPC tracker (None: measure here)."""
    from ..rpc import RpcConfig

    return RpcConfig.parse(spec["rpc"]) if spec.get("rpc") else None


def check_spec(spec: dict) -> None:
    """Refuse a bad spec in the caller, not in the worker's log."""
    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        raise TuneError(f"not a job spec (format must be {SPEC_FORMAT!r})")
    if spec.get("kind") in ("session", "replay"):
        from ...session.session import loads

        loads(json.dumps(spec.get("session")))  # a full replay: a bad step is named here, not in the worker's log
    elif spec.get("kind") != "baselines":  # its tuning job's folder holds what it reads
        tasks_from_spec(spec)
    rpc_of(spec)


def kind_of(spec: Any) -> str:
    """What the user calls the job of ``spec``: ``"tuning"``, ``"replay"`` or ``"baselines"``."""
    return KINDS.get(spec.get("kind", "tasks") if isinstance(spec, dict) else "tasks", "tuning")
