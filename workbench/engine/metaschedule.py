"""The loop-only stage: MetaSchedule (XGBoost cost model, evolutionary search) on kernels,
with live progress and optional RPC measurement.

Records go to a MetaSchedule ``JSONDatabase`` in ``work_dir``; a run started again on the same
folder resumes: the records already there are kept, count toward the budget, and take part in
the best result. Every measurement is appended as one JSON line to ``progress_path``:
``{"task", "stage", "trial", "layout", "trace_id", "latency_ms", "error", "predicted",
"best_ms", "time"}`` (``latency_ms`` is null and ``error`` holds TVM's message for a candidate
that failed to build or run; such candidates are skipped).
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import json
import math
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import inspect
import linecache
import sys

import tvm
import tvm.s_tir.meta_schedule as ms
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from .errors import TuneError

__all__ = ["TuneTask", "TuneResult", "RpcConfig", "tune_loops", "read_progress", "best_record", "plain",
           "InProcessBuilder", "InProcessRunner"]


def _light_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack`` without the per-frame source lookups (only the frames TVMScript reads)."""
    frame, out, depth = sys._getframe(1), [], 0
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno) if depth < 4 and context > 0 else ""
        out.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                     [line] if line else None, 0 if line else None, positions=None))
        frame, depth = frame.f_back, depth + 1
    return out


def _import_tensor_intrin() -> None:
    """MetaSchedule parses ~500 TVMScript intrinsics on first use, each calling
    ``inspect.stack()``; that costs ~40 s per process on this 2-core machine, ~2 s with a light stack."""
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    real = inspect.stack
    inspect.stack = _light_stack
    try:
        import tvm.s_tir.tensor_intrin  # noqa: F401
    finally:
        inspect.stack = real


_import_tensor_intrin()


@dataclass(frozen=True)
class TuneTask:
    """A kernel to tune: a valid identifier, its PrimFunc and its FLOP count."""

    name: str
    func: tvm.tirx.PrimFunc
    flops: int


@dataclass(frozen=True)
class TuneResult:
    task: str
    best_ms: float | None
    trace: Any  # JSON trace of the best record (re-applies to the task's PrimFunc)
    measurements: int


@dataclass(frozen=True)
class RpcConfig:
    """Where to measure: a TVM RPC tracker and the device key its servers registered with."""

    host: str
    port: int
    key: str
    timeout_s: float = 600.0

    @staticmethod
    def parse(text: str) -> "RpcConfig":
        """``HOST:PORT:KEY``, e.g. ``127.0.0.1:9190:local``."""
        parts = str(text).split(":")
        if len(parts) != 3 or not all(parts):
            raise TuneError(f"--rpc wants HOST:PORT:KEY (e.g. 127.0.0.1:9190:local), got {text!r}")
        host, port, key = parts
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise TuneError(f"--rpc port must be a number from 1 to 65535, got {port!r}")
        if not re.match(r"^[A-Za-z0-9_.-]+$", key):
            raise TuneError(f"--rpc key {key!r} may only hold letters, digits, _ . -")
        return RpcConfig(host, int(port), key)

    def runner(self) -> ms.runner.RPCRunner:
        return ms.runner.RPCRunner(
            rpc_config=ms.runner.RPCConfig(tracker_host=self.host, tracker_port=self.port, tracker_key=self.key,
                                           session_timeout_sec=60),
            evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=50), max_workers=1)


def _trace_id(cand: Any) -> str:
    return hashlib.sha1(json.dumps(cand.sch.trace.as_json(), default=str).encode()).hexdigest()[:10]


def _err(msg: str) -> str:
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    hits = [ln for ln in lines if "Error" in ln or "Timeout" in ln or "error" in ln]
    return (hits[0] if hits else lines[0] if lines else "failed")[:300]


@derived_object
class _Progress(PyMeasureCallback):
    """Appends one JSON line per measurement (called by MetaSchedule after each batch)."""

    def __init__(self, path: Path | None, stage: str, layout: str | None, names: list[str], done: dict[str, int],
                 best: dict[str, float]) -> None:
        self.path, self.stage, self.layout, self.names = path, stage, layout, names
        self.done, self.best = done, best

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Any, builder_results: Any,
              runner_results: Any) -> None:
        task = self.names[int(task_id)]
        rows = []
        for cand, br, rr in zip(measure_candidates, builder_results, runner_results):
            self.done[task] = self.done.get(task, 0) + 1
            ok = br.error_msg is None and rr.error_msg is None and rr.run_secs
            lat = sum(float(x) for x in rr.run_secs) / len(rr.run_secs) * 1e3 if ok else None
            if lat is not None and lat >= 1e9:  # MetaSchedule's sentinel for a failed run
                lat = None
            if lat is not None:
                self.best[task] = min(self.best.get(task, math.inf), lat)
            rows.append({"task": task, "stage": self.stage, "trial": self.done[task], "layout": self.layout,
                         "trace_id": _trace_id(cand), "latency_ms": lat,
                         "error": None if lat is not None else _err(br.error_msg or rr.error_msg or "no run time"),
                         "predicted": None, "best_ms": self.best.get(task), "time": time.time()})
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
                f.flush()


########## In-process measurement: no worker pools (they cost ~20 s to start on 2 cores) ##########

_BUILT: dict[str, Any] = {}  # artifact path -> runtime module, from builder to runner
_ROOT: list[Path] = []


def _build_root() -> Path:
    """One scratch folder per process for artifact names, removed at exit."""
    if not _ROOT:
        _ROOT.append(Path(tempfile.mkdtemp(prefix="alt-wb-build-")))
        atexit.register(shutil.rmtree, _ROOT[0], ignore_errors=True)
    return _ROOT[0]


@derived_object
class InProcessBuilder(ms.builder.PyBuilder):
    """Builds candidates in this process and hands them to ``InProcessRunner`` in memory."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = _build_root()

    def build(self, build_inputs: list) -> list:
        from tvm.s_tir.meta_schedule.builder.local_builder import default_build

        out = []
        for bi in build_inputs:
            try:
                rt = default_build(bi.mod, bi.target, None)
            except Exception as e:  # a candidate TVM cannot build: recorded with its error
                out.append(ms.builder.BuilderResult(None, f"build failed: {_err(e)}"))
                continue
            self.tmp.mkdir(parents=True, exist_ok=True)  # someone may have cleaned /tmp meanwhile
            path = str(Path(tempfile.mkdtemp(dir=self.tmp)) / "module.mem")  # the runner's key
            _BUILT[path] = rt
            out.append(ms.builder.BuilderResult(path, None))
        return out


@derived_object
class InProcessRunner(ms.runner.PyRunner):
    """Times candidates built by ``InProcessBuilder`` with TVM's own evaluator."""

    def __init__(self, config: ms.runner.EvaluatorConfig) -> None:
        super().__init__()
        self.config = config

    def run(self, runner_inputs: list) -> list:
        from tvm.s_tir.meta_schedule.runner import local_runner as lr

        out = []
        for ri in runner_inputs:
            rt = _BUILT.pop(str(ri.artifact_path), None)
            try:
                if rt is None:
                    raise RuntimeError("artifact not built in this process")
                dev = tvm.runtime.device(str(ri.device_type), 0)
                args = lr.default_alloc_argument(dev, tuple(a.as_json() for a in ri.args_info), 1)
                out.append(lr.LocalRunnerFuture(res=lr.default_run_evaluator(rt, dev, self.config, args)))
            except Exception as e:
                out.append(lr.LocalRunnerFuture(error_message=f"run failed: {_err(e)}"))
        return out


def _measurers(rpc: "RpcConfig | None", isolated: bool) -> tuple[Any, Any]:
    config = ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=20)
    if rpc is not None:
        return ms.builder.LocalBuilder(timeout_sec=60), rpc.runner()
    if isolated:
        return ms.builder.LocalBuilder(timeout_sec=60), ms.runner.LocalRunner(evaluator_config=config)
    return InProcessBuilder(), InProcessRunner(config)


def plain(obj: Any) -> Any:
    """A trace's JSON with TVM scalars and containers turned into plain Python (for files)."""
    if isinstance(obj, (str, bool, int, float)) or obj is None:
        return obj
    if hasattr(obj, "value") and not isinstance(obj, (list, dict)):
        return obj.value
    if isinstance(obj, dict) or hasattr(obj, "items"):
        return {str(k): plain(v) for k, v in obj.items()}
    return [plain(x) for x in obj]


def _database(work_dir: Path) -> ms.database.JSONDatabase:
    work_dir.mkdir(parents=True, exist_ok=True)
    return ms.database.JSONDatabase(path_workload=str(work_dir / "database_workload.json"),
                                    path_tuning_record=str(work_dir / "database_tuning_record.json"))


def best_record(db: ms.database.Database, func: tvm.tirx.PrimFunc) -> tuple[float | None, Any, int]:
    """Best latency (ms), its trace as JSON, and the number of records of ``func`` in ``db``."""
    mod = tvm.IRModule({"main": func})
    if not db.has_workload(mod):
        return None, None, 0
    wl = db.commit_workload(mod)
    recs = db.get_top_k(wl, 1 << 30)
    good = [r for r in recs if r.run_secs and all(float(x) < 1e9 for x in r.run_secs)]
    if not good:
        return None, None, len(recs)
    r = good[0]
    return sum(float(x) for x in r.run_secs) / len(r.run_secs) * 1e3, plain(r.trace.as_json()), len(recs)


def tune_loops(tasks: Sequence[TuneTask], target: dict, work_dir: Path, budget: int, *, stage: str = "loop",
               progress_path: Path | None = None, rpc: RpcConfig | None = None, num_trials_per_iter: int = 8,
               layout_label: str | None = None, seed: int | None = None,
               isolated: bool = False) -> dict[str, TuneResult]:
    """Tune ``tasks`` with at most ``budget`` hardware measurements in all (earlier records in
    ``work_dir`` count toward it). Returns each task's best result.

    Candidates are built and timed in this process (fast: no worker pools), or with
    ``isolated=True`` in TVM's worker processes (a crashing candidate cannot take the caller
    down); with ``rpc`` they are built here and timed on the RPC tracker's devices."""
    if not tasks:
        raise TuneError("nothing to tune")
    if "num-cores" not in target:
        raise TuneError('MetaSchedule needs "num-cores" in the target')
    work_dir = Path(work_dir)
    db = _database(work_dir)
    before = {t.name: best_record(db, t.func)[2] for t in tasks}
    left = budget - sum(before.values())
    if left > 0:
        names = [t.name for t in tasks]
        best = {t.name: b for t in tasks if (b := best_record(db, t.func)[0]) is not None}
        callback = _Progress(progress_path, stage, layout_label, names, dict(before), best)
        builder, runner = _measurers(rpc, isolated)
        contexts = [ms.TuneContext(mod=tvm.IRModule({"main": t.func}), target=tvm.target.Target(dict(target)),
                                   space_generator="post-order-apply", search_strategy="evolutionary",
                                   task_name=t.name, rand_state=-1 if seed is None else seed + i)
                    for i, t in enumerate(tasks)]
        per_iter = max(1, min(num_trials_per_iter, left))
        try:
            ms.tune.tune_tasks(tasks=contexts, task_weights=[1.0] * len(tasks), work_dir=str(work_dir),
                               max_trials_global=left, max_trials_per_task=max(per_iter, left),
                               num_trials_per_iter=per_iter, builder=builder,
                               runner=runner, database=db, cost_model="xgb",
                               measure_callbacks=[*ms.MeasureCallback.create("default"), callback])
        except Exception as e:
            raise TuneError(f"tuning failed: {_err(e)}") from None
    out = {}
    for t in tasks:
        ms_, trace, n = best_record(db, t.func)
        out[t.name] = TuneResult(t.name, ms_, trace, n)
    return out


def read_progress(path: str | Path) -> list[dict]:
    """The progress lines so far (a half-written last line is skipped)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
