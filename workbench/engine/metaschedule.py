"""The loop-only stage: MetaSchedule (XGBoost cost model, evolutionary search) on kernels,
with live progress and optional RPC measurement.

Records go to a MetaSchedule ``JSONDatabase`` in ``work_dir``, so nothing measured is lost; a run
started again on the same folder resumes: the records already there are kept, **count toward the
budget**, seed the evolutionary search and take part in the best result.

Every measurement is appended (and flushed) as one JSON line to ``progress_path``::

    {"task": "mm", "stage": "loop", "trial": 3, "layout": null, "trace_id": "a1b2c3d4e5",
     "latency_ms": 0.0213, "error": null, "predicted": null, "best_ms": 0.0198, "time": 1795000000.1}

``trial`` counts the task's measurements, earlier runs on the same folder included;
``latency_ms`` is null and ``error`` holds TVM's message (trimmed) for a candidate that failed to
build or run (such a candidate is skipped and tuning goes on); ``predicted`` is the latency the
XGBoost model expected for the candidate before it was measured (null until the model has its
warm-up samples); ``best_ms`` is the task's best latency so far.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import inspect
import json
import linecache
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import tvm
import tvm.s_tir.meta_schedule as ms
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from .errors import TuneError
from .program import resolve_target

__all__ = ["TuneTask", "TuneResult", "RpcConfig", "tune_loops", "read_progress", "best_record", "plain",
           "budget_shares", "InProcessBuilder", "InProcessRunner"]

_FAILED_SECS = 1e9  # MetaSchedule records a failed candidate with run_secs = [1e10]


########## Start-up: MetaSchedule's tensor intrinsics ##########

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
    ``inspect.stack()``; that costs ~30 s per process on this 2-core machine, ~2 s with a light stack.

    ``LocalBuilder`` imports them in every build worker, inside the build timeout, and restarts its
    workers for every batch: this function is also the workers' initializer."""
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    real = inspect.stack
    inspect.stack = _light_stack
    try:
        import tvm.s_tir.tensor_intrin  # noqa: F401
    finally:
        inspect.stack = real


_import_tensor_intrin()


def _children_can_import_us() -> None:
    """TVM's worker processes unpickle our initializer and RPC session function by reference:
    they must be able to ``import workbench`` wherever they were started."""
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


########## Tasks and results ##########

@dataclass(frozen=True)
class TuneTask:
    """A kernel to tune: a valid identifier, its PrimFunc and its FLOP count."""

    name: str
    func: tvm.tirx.PrimFunc
    flops: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise TuneError(f"a task name must be an identifier, got {self.name!r}")
        if not isinstance(self.func, tvm.tirx.PrimFunc):
            raise TuneError(f"task {self.name}: func must be a PrimFunc, got {type(self.func).__name__}")


@dataclass(frozen=True)
class TuneResult:
    """A task's best record after tuning (``best_ms`` and ``trace`` are None when nothing ran).

    ``trace`` is the best schedule's trace as plain JSON; ``scheduled(func)`` re-applies it to
    the task's PrimFunc. ``measurements`` counts every record of the task in the database
    (failed ones, and those of earlier runs, included); ``failed`` counts the failed ones."""

    task: str
    best_ms: float | None
    trace: Any
    measurements: int
    failed: int = 0
    flops: int = 0

    @property
    def gflops(self) -> float | None:
        return self.flops / self.best_ms / 1e6 if self.best_ms and self.flops else None

    def scheduled(self, func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
        """``func`` with the best trace applied: the tuned kernel, ready for ``tvm.compile``."""
        if self.trace is None:
            raise TuneError(f"task {self.task} has no successful measurement to apply")
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
        try:
            tvm.s_tir.schedule.Trace.apply_json_to_schedule(self.trace, sch)
        except Exception as e:  # a trace from another kernel
            raise TuneError(f"the trace of task {self.task} does not apply to this kernel: {_err(e)}") from None
        return sch.mod["main"]

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> "TuneResult":
        return TuneResult(d["task"], d.get("best_ms"), d.get("trace"), int(d.get("measurements", 0)),
                          int(d.get("failed", 0)), int(d.get("flops", 0)))


########## RPC measurement ##########

_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")
_HOST = re.compile(r"^[A-Za-z0-9_.:-]+$")


@dataclass(frozen=True)
class RpcConfig:
    """Where to measure: a TVM RPC tracker and the device key its servers registered with.

    ``timeout_s`` bounds the wait for a free server and one measurement session."""

    host: str
    port: int
    key: str
    timeout_s: float = 120.0

    @staticmethod
    def parse(text: str) -> "RpcConfig":
        """Read ``HOST:PORT:KEY`` (an IPv6 host goes in brackets).

        >>> RpcConfig.parse("127.0.0.1:9190:local")
        RpcConfig(host='127.0.0.1', port=9190, key='local', timeout_s=120.0)
        >>> RpcConfig.parse("[::1]:9190:pi4").host
        '::1'
        >>> RpcConfig.parse("127.0.0.1:local")
        Traceback (most recent call last):
        ...
        workbench.engine.errors.TuneError: an RPC address is HOST:PORT:KEY (e.g. 127.0.0.1:9190:local), got '127.0.0.1:local'
        """
        text = str(text).strip()
        parts = text.rsplit(":", 2)
        if len(parts) != 3:
            raise TuneError(f"an RPC address is HOST:PORT:KEY (e.g. 127.0.0.1:9190:local), got {text!r}")
        host, port, key = parts
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host:
            raise TuneError(f"the RPC tracker host is missing in {text!r} (HOST:PORT:KEY)")
        if not _HOST.match(host):
            raise TuneError(f"the RPC tracker host {host!r} is not a host name or IP address")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise TuneError(f"the RPC tracker port must be a number from 1 to 65535, got {port!r}")
        if not key:
            raise TuneError(f"the RPC device key is missing in {text!r} (HOST:PORT:KEY)")
        if not _KEY.match(key):
            raise TuneError(f"the RPC device key {key!r} may only hold letters, digits, '_', '.' and '-'")
        return RpcConfig(host, int(port), key)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}:{self.key}"

    def _ms_config(self) -> ms.runner.RPCConfig:
        return ms.runner.RPCConfig(tracker_host=self.host, tracker_port=self.port, tracker_key=self.key,
                                   session_timeout_sec=int(self.timeout_s))

    def servers(self) -> int:
        """How many servers are registered with the tracker under ``key`` (0 if none)."""
        summary = _tracker_summary(self.host, self.port, min(10.0, self.timeout_s))
        if summary is None:
            raise TuneError(f"cannot reach the RPC tracker at {self.host}:{self.port}; check it with "
                            f"python -m tvm.exec.query_rpc_tracker --host {self.host} --port {self.port}")
        keys = [str(s.get("key", "")).split(":", 1)[-1] for s in summary.get("server_info", [])]
        return keys.count(self.key)

    def check(self) -> int:
        """The number of servers under ``key``; a clear error when there are none (without this
        check a wrong key makes MetaSchedule's RPC runner wait forever)."""
        n = self.servers()
        if n == 0:
            raise TuneError(f"no RPC server is registered with key {self.key!r} at the tracker "
                            f"{self.host}:{self.port}; start one with python -m tvm.exec.rpc_server "
                            f"--tracker {self.host}:{self.port} --key {self.key}")
        return n

    def runner(self, workers: int = 1) -> ms.runner.RPCRunner:
        _children_can_import_us()
        return ms.runner.RPCRunner(rpc_config=self._ms_config(), evaluator_config=_EVALUATOR,
                                   f_create_session=_rpc_session, max_workers=max(1, workers),
                                   initializer=_import_tensor_intrin)


def _tracker_summary(host: str, port: int, timeout_s: float) -> dict | None:
    """The tracker's summary, or None if it does not answer within ``timeout_s`` (TVM's own
    client retries for a minute, in a thread that keeps the process alive)."""
    import socket

    from tvm import rpc

    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError:
        return None
    got: dict[str, Any] = {}

    def ask() -> None:
        try:
            got["summary"] = rpc.connect_tracker(host, port).summary()
        except Exception:  # noqa: BLE001 (None means: no answer)
            pass

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    t.join(timeout_s)
    return got.get("summary")


def _rpc_session(rpc_config: ms.runner.RPCConfig) -> Any:
    """MetaSchedule's session request, with a deadline: ``TrackerSession.request`` waits
    forever for a server with the key (runs in the RPC runner's worker process)."""
    tracker = rpc_config.connect_tracker()
    got: dict[str, Any] = {}

    def request() -> None:
        try:
            got["session"] = tracker.request(key=rpc_config.tracker_key, priority=rpc_config.session_priority,
                                             session_timeout=rpc_config.session_timeout_sec)
        except Exception as e:  # noqa: BLE001 (reported below)
            got["error"] = e

    t = threading.Thread(target=request, daemon=True)
    t.start()
    t.join(rpc_config.session_timeout_sec)
    if "session" not in got:
        raise RuntimeError(f"RPC: {got['error']}" if "error" in got else
                           f"RPC: no server with key {rpc_config.tracker_key!r} became free within "
                           f"{rpc_config.session_timeout_sec} s")
    return got["session"]


########## Progress lines ##########

def plain(obj: Any) -> Any:
    """A trace's JSON with TVM scalars and containers turned into plain Python (for files)."""
    if isinstance(obj, (str, bool, int, float)) or obj is None:
        return obj
    if hasattr(obj, "value") and not isinstance(obj, (list, dict)):
        return obj.value
    if isinstance(obj, dict) or hasattr(obj, "items"):
        return {str(k): plain(v) for k, v in obj.items()}
    return [plain(x) for x in obj]


def _trace_id(trace_json: Any) -> str:
    return hashlib.sha1(json.dumps(plain(trace_json), sort_keys=True).encode()).hexdigest()[:10]


def _err(msg: Any, limit: int = 300) -> str:
    """TVM's message, trimmed: its first line and its last line naming an error.

    >>> _err("LocalBuilder: An exception occurred\\nTraceback (most recent call last):\\n  File x\\nValueError: bad")
    'LocalBuilder: An exception occurred: ValueError: bad'
    """
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    if not lines:
        return "failed"
    last = next((ln for ln in reversed(lines[1:]) if "Error" in ln or "error" in ln or "Timeout" in ln), None)
    text = lines[0] if last is None else f"{lines[0].rstrip(':')}: {last}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _latency_ms(run_secs: Any) -> float | None:
    secs = [float(x) for x in run_secs or []]
    if not secs or any(s >= _FAILED_SECS for s in secs):
        return None
    return sum(secs) / len(secs) * 1e3


def _repair_jsonl(path: Path) -> None:
    """Drop a half-written last line (a job killed while writing), so appends start clean."""
    try:
        data = path.read_bytes()
    except OSError:
        return
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[:data.rfind(b"\n") + 1])


def read_progress(path: str | Path) -> list[dict]:
    """The progress lines so far (a half-written or garbled line is skipped).

    >>> p = Path(tempfile.mkdtemp()) / "p.jsonl"
    >>> _ = p.write_text('{"trial": 1}\\n{"trial": 2}\\n{"tri')
    >>> read_progress(p)
    [{'trial': 1}, {'trial': 2}]
    """
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


@derived_object
class _Progress(PyMeasureCallback):
    """Appends one JSON line per measurement; MetaSchedule calls it after each batch."""

    def __init__(self, path: Path | None, task: str, stage: str, layout: str | None, done: int,
                 best: float | None, model: Any) -> None:
        self.path, self.task, self.stage, self.layout = path, task, stage, layout
        self.done, self.best, self.model = done, best, model
        self.errors: list[str] = []
        self.ok = 0

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Any, builder_results: Any,
              runner_results: Any) -> None:
        try:
            predicted = self._predicted(task_scheduler.tasks_[int(task_id)].ctx, measure_candidates)
        except Exception:  # noqa: BLE001 (a prediction is optional)
            predicted = [None] * len(measure_candidates)
        rows = []
        for cand, br, rr, pred in zip(measure_candidates, builder_results, runner_results, predicted):
            self.done += 1
            error = br.error_msg or rr.error_msg
            lat = None if error else _latency_ms(rr.run_secs)
            if lat is None:
                error = _err(error or "no run time")
                self.errors.append(error)
            else:
                self.ok += 1
                self.best = lat if self.best is None else min(self.best, lat)
            rows.append({"task": self.task, "stage": self.stage, "trial": self.done, "layout": self.layout,
                         "trace_id": _trace_id(cand.sch.trace.as_json()), "latency_ms": lat,
                         "error": error, "predicted": pred, "best_ms": self.best, "time": time.time()})
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
                f.flush()

    def _predicted(self, ctx: Any, candidates: Any) -> list[float | None]:
        """Predicted latency (ms) = the task's best measured latency / the model's normalized score."""
        from tvm.s_tir.meta_schedule.utils import shash2hex

        m = self.model
        group = m.data.get(shash2hex(ctx.mod)) if m is not None else None
        if group is None or m.booster is None or m.data_size < m.num_warmup_samples:
            return [None] * len(candidates)
        scores = m.predict(ctx, list(candidates))
        return [float(group.min_cost) * 1e3 / s if s > 0 else None for s in scores]


########## In-process measurement: no worker pools ##########

_EVALUATOR = ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=20)
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
    """Builds candidates in this process and hands them to ``InProcessRunner`` in memory
    (no start-up cost, but no build timeout and no protection from a crashing build)."""

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


@functools.lru_cache(maxsize=4)
def _local_builder(timeout_s: float) -> ms.builder.LocalBuilder:
    """One per process and timeout: its constructor starts a pool to check itself (~5 s)."""
    _children_can_import_us()
    return ms.builder.LocalBuilder(timeout_sec=timeout_s, initializer=_import_tensor_intrin)


@functools.lru_cache(maxsize=1)
def _local_runner() -> ms.runner.LocalRunner:
    """One per process: its worker pool (~5 s to start) is kept between tunings."""
    _children_can_import_us()
    return ms.runner.LocalRunner(evaluator_config=_EVALUATOR, initializer=_import_tensor_intrin)


def _measurers(rpc: RpcConfig | None, isolated: bool, build_timeout_s: float) -> tuple[Any, Any]:
    if rpc is None and not isolated:
        return InProcessBuilder(), InProcessRunner(_EVALUATOR)
    if rpc is not None:
        servers = rpc.check()  # before any worker pool starts
        return _local_builder(float(build_timeout_s)), rpc.runner(workers=servers)
    return _local_builder(float(build_timeout_s)), _local_runner()


########## Database ##########

def _database(work_dir: Path) -> ms.database.JSONDatabase:
    work_dir.mkdir(parents=True, exist_ok=True)
    paths = work_dir / "database_workload.json", work_dir / "database_tuning_record.json"
    for p in paths:
        _repair_jsonl(p)
    try:
        return ms.database.JSONDatabase(path_workload=str(paths[0]), path_tuning_record=str(paths[1]))
    except Exception as e:
        raise TuneError(f"the MetaSchedule database in {work_dir} cannot be read: {_err(e)}") from None


def _records(db: ms.database.Database, func: tvm.tirx.PrimFunc) -> list:
    """Every record of ``func``, failed ones (run_secs = [1e10], builds included) too:
    ``get_top_k`` leaves those out."""
    mod = tvm.IRModule({"main": func})
    if not db.has_workload(mod):
        return []
    wl = db.commit_workload(mod)
    return [r for r in db.get_all_tuning_records() if r.workload.same_as(wl)]


def best_record(db: ms.database.Database, func: tvm.tirx.PrimFunc) -> tuple[float | None, Any, int]:
    """Best latency (ms), its trace as plain JSON, and the number of records of ``func`` in ``db``."""
    recs = _records(db, func)
    good = [(lat, r) for r in recs if (lat := _latency_ms(r.run_secs)) is not None]
    if not good:
        return None, None, len(recs)
    lat, r = min(good, key=lambda x: x[0])
    return lat, plain(r.trace.as_json()), len(recs)


def _result(db: ms.database.Database, task: TuneTask) -> TuneResult:
    recs = _records(db, task.func)
    best, trace, n = best_record(db, task.func)
    failed = sum(1 for r in recs if _latency_ms(r.run_secs) is None)
    return TuneResult(task.name, best, trace, n, failed, int(task.flops))


########## Tuning ##########

def budget_shares(flops: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` measurements in proportion to FLOPs, at least one each, summing to ``budget``.

    >>> budget_shares([3_000, 1_000], 16)
    [12, 4]
    >>> budget_shares([10**9, 1, 1], 5)
    [3, 1, 1]
    """
    n = len(flops)
    if budget < n:
        raise TuneError(f"a budget of {budget} measurements cannot give each of {n} kernels one")
    weights = [max(float(f), 1.0) for f in flops]
    total, spare = sum(weights), budget - n
    exact = [spare * w / total for w in weights]
    shares = [1 + int(x) for x in exact]
    order = sorted(range(n), key=lambda i: int(exact[i]) - exact[i])  # largest remainders first
    for i in order[:budget - sum(shares)]:
        shares[i] += 1
    return shares


def tune_loops(tasks: Sequence[TuneTask], target: dict, work_dir: Path, budget: int, *, stage: str = "loop",
               progress_path: Path | None = None, rpc: RpcConfig | None = None, num_trials_per_iter: int = 8,
               layout_label: str | None = None, seed: int | None = None, isolated: bool = True,
               build_timeout_s: float = 60.0) -> dict[str, TuneResult]:
    """Tune ``tasks`` with MetaSchedule (XGBoost cost model, evolutionary search) in at most
    ``budget`` hardware measurements in all, and return each task's best result.

    The budget is split across tasks in proportion to their FLOPs (at least one measurement
    each); the tasks are tuned one after another, smallest share first, and a share a task cannot
    use (its search space is exhausted) passes to the next. Records go to a ``JSONDatabase`` in
    ``work_dir``. **Resuming**: records already there (failed ones included) count toward the
    budget and toward each task's share, seed the search (it measures no candidate twice) and
    take part in the best result; a run on a folder that holds ``budget`` records measures nothing.

    Candidates are built by ``LocalBuilder(timeout_sec=build_timeout_s)`` and timed by
    ``LocalRunner`` in TVM's worker processes, so a crashing or hanging candidate is recorded
    with its error and skipped; ``isolated=False`` builds and times in this process instead
    (no worker pools: their start-up costs ~10 s in a process's first tuning and ~5 s per batch
    of builds; no protection). With ``rpc`` the builds stay local and the
    candidates are timed on the tracker's servers; a tracker without servers for the key is
    refused up front and a server that stops answering fails its measurements after
    ``rpc.timeout_s``.

    Raises
    ------
    TuneError
        No tasks, duplicate names, a target without ``num-cores``, a budget smaller than the
        number of tasks, an unreachable RPC tracker or key, or an RPC run where no measurement
        succeeded.
    """
    if not tasks:
        raise TuneError("nothing to tune")
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise TuneError(f"task names must be unique, got {names}")
    if "num-cores" not in target:
        raise TuneError('MetaSchedule needs "num-cores" in the target, e.g. {"kind": "llvm", "num-cores": 2}')
    if num_trials_per_iter < 1:
        raise TuneError(f"num_trials_per_iter must be at least 1, got {num_trials_per_iter}")
    shares = budget_shares([t.flops for t in tasks], budget)
    work_dir = Path(work_dir)
    db = _database(work_dir)
    if progress_path is not None:
        Path(progress_path).parent.mkdir(parents=True, exist_ok=True)
        _repair_jsonl(Path(progress_path))
    done = {t.name: best_record(db, t.func)[2] for t in tasks}
    left = budget - sum(done.values())
    if left > 0:
        try:
            tgt = tvm.target.Target(resolve_target(target))
        except Exception as e:
            raise TuneError(f"bad target {target}: {_err(e)}") from None
        builder, runner = _measurers(rpc, isolated, build_timeout_s)
        model = ms.cost_model.XGBModel(num_tuning_cores=int(target["num-cores"]), tree_method="auto")
        rand = ms.utils.fork_seed(seed, n=len(tasks)) if seed is not None else [-1] * len(tasks)
        callbacks, carry = [], 0
        for i in sorted(range(len(tasks)), key=lambda i: shares[i]):
            task, want = tasks[i], min(left, max(0, shares[i] - done[tasks[i].name]) + carry)
            if want <= 0:
                continue
            callback = _Progress(progress_path, task.name, stage, layout_label, done[task.name],
                                 best_record(db, task.func)[0], model)
            callbacks.append(callback)
            _tune_one(task, tgt, work_dir, want, min(num_trials_per_iter, want), rand[i], builder, runner, db,
                      model, callback)
            measured = callback.done - done[task.name]
            carry, left = want - measured, left - measured
        if rpc is not None and callbacks and not any(c.ok for c in callbacks):
            first = next((e for c in callbacks for e in c.errors), "nothing was measured")
            raise TuneError(f"no measurement through the RPC tracker {rpc.host}:{rpc.port} (key {rpc.key!r}) "
                            f"succeeded: {first}")
    return {t.name: _result(db, t) for t in tasks}


def _callbacks(progress: _Progress) -> list:
    """MetaSchedule's default callbacks with ours after ``AddToDatabase`` (a progress line is
    written only for a committed record) and before ``UpdateCostModel`` (``predicted`` comes
    from the model that chose the batch)."""
    default = list(ms.MeasureCallback.create("default"))
    at = next((i + 1 for i, c in enumerate(default) if isinstance(c, ms.measure_callback.AddToDatabase)), 0)
    return [*default[:at], progress, *default[at:]]


def _tune_one(task: TuneTask, target: tvm.target.Target, work_dir: Path, trials: int, per_iter: int, rand: int,
              builder: Any, runner: Any, db: Any, model: Any, callback: _Progress) -> None:
    ctx = ms.TuneContext(mod=tvm.IRModule({"main": task.func}), target=target, space_generator="post-order-apply",
                         search_strategy="evolutionary", task_name=task.name, rand_state=rand)
    try:
        ms.tune.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=str(work_dir), max_trials_global=trials,
                           max_trials_per_task=trials, num_trials_per_iter=per_iter, builder=builder,
                           runner=runner, database=db, cost_model=model, measure_callbacks=_callbacks(callback))
    except Exception as e:
        raise TuneError(f"tuning {task.name} failed: {_err(e)}") from None
