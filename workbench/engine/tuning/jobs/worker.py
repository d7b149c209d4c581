"""The job process: ``python -m workbench.engine.tuning.jobs.worker JOB_DIR`` (``start_job``
launches it in a new process group) waits in the queue without importing TVM, then does what
the folder's ``spec.json`` says (``run_job``) and writes ``result.json``, or ``error.json``.

A job stopped or killed mid-run loses no completed measurement: a new job on the same folder
resumes from its database. The names of ``spec`` and ``handle`` are importable from here too.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ...base.errors import TuneError, WorkbenchError
from ..startup import import_tensor_intrinsics
from .files import read_json, write_json
from .handle import MAX_JOBS_ENV, WORKER_MODULE, Job, JobQueue, JobStatus, start_job
from .spec import (baselines_job_spec, job_spec, replay_job_spec, rpc_of, session_from_spec, session_job_spec,
                   tasks_from_spec)

if TYPE_CHECKING:
    from ..records import TuneResult

__all__ = ["JobStatus", "Job", "JobQueue", "job_spec", "session_job_spec", "replay_job_spec", "baselines_job_spec",
           "tasks_from_spec", "start_job", "run_job", "main", "MAX_JOBS_ENV"]


def run_job(job_dir: Path) -> dict[str, TuneResult]:
    """Do what ``job_dir/spec.json`` says and write ``result.json`` (what the worker runs)."""
    from ..options import TuneOptions

    job_dir = Path(job_dir)
    spec = read_json(job_dir / "spec.json")
    if spec is None:
        raise TuneError(f"{job_dir / 'spec.json'} is missing or not JSON")
    progress = job_dir / "progress.jsonl"
    if spec.get("kind") == "replay":
        from ...session.artifacts import replay_to

        report = replay_to(session_from_spec(spec), job_dir / "out", spec.get("target"))
        write_json(job_dir / "result.json", {"replay": report.to_json(), "finished": time.time()})
        return {}
    if spec.get("kind") == "session":
        from ..stages import tune_network

        options = TuneOptions(rpc=rpc_of(spec), progress_path=progress,
                              joint_fraction=float(spec.get("joint_fraction", 0.3)),
                              search=spec.get("search", "model"), seed=_seed(spec.get("seed", 0)),
                              keep_faster=bool(spec.get("keep_faster", True)))
        tuned = tune_network(session_from_spec(spec), spec["stage"], int(spec["budget"]), job_dir / "work", options)
        result = {"session": tuned.session.to_json(), "network": tuned.to_json(), "finished": time.time()}
        write_json(job_dir / "result.json", result)  # the result first: timing its baselines may fail
        if spec.get("baselines", False):
            from .baselines import report_json

            write_json(job_dir / "result.json", {**result, **report_json(tuned.start, tuned.state)})
        return {}
    if spec.get("kind") == "baselines":
        from .baselines import report_json

        of = Job.attach(Path(spec["of"]))
        tuned = None if of is None else of.tuned_state(of.owner) or getattr(of.partial_result(of.owner), "state", None)
        if tuned is None:
            raise TuneError(f"the tuning job in {spec['of']} has no result to time against its baselines")
        start = session_from_spec(read_json(of.dir / "spec.json"))
        write_json(job_dir / "result.json", {**report_json(start, tuned), "started": spec.get("started")})
        return {}
    from ..loop import tune_loops

    options = TuneOptions(rpc=rpc_of(spec), progress_path=progress, seed=_seed(spec.get("seed")),
                          isolated=bool(spec.get("isolated", True)),
                          num_trials_per_iter=int(spec.get("num_trials_per_iter", 8)))
    results = tune_loops(tasks_from_spec(spec), spec["target"], job_dir / "work", int(spec["budget"]), options,
                         stage=spec.get("stage", "loop"), layout_label=spec.get("layout_label"))
    write_json(job_dir / "result.json", {"results": {k: r.to_json() for k, r in results.items()},
                                          "finished": time.time()})
    return results


def _seed(value: Any) -> int | None:
    return None if value is None else int(value)


def _take_slot(job_dir: Path) -> int | None:
    """Wait in the job's queue for a slot (None for a folder started without a queue)."""
    q = read_json(job_dir / "queue.json")
    if not isinstance(q, dict):
        return None
    return JobQueue(Path(q["folder"]), int(q["limit"])).take_slot(q["ticket"], job_dir)


def main(argv: Sequence[str] | None = None) -> int:
    """The worker process: wait for a slot, start-up, then ``run_job``; a failure goes to ``error.json``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: python -m {WORKER_MODULE} JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(args[0])
    try:
        slot = _take_slot(job_dir)  # noqa: F841 (held open, so locked, until this process exits)
        import_tensor_intrinsics()  # the start-up every tuning in this process needs, once
        run_job(job_dir)
    except Exception as e:  # noqa: BLE001 (reported to the parent through error.json)
        msg = str(e) if isinstance(e, WorkbenchError) else f"{type(e).__name__}: {e}"
        write_json(job_dir / "error.json", {"error": msg, "traceback": traceback.format_exc()})
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

