"""The builders and runners that measure candidates: in this process (``InProcessBuilder`` /
``InProcessRunner``: no start-up cost, no protection but a build timeout), in TVM's worker
processes, or on RPC servers. ``Measurers`` owns them for one or more tunings, so TVM's worker pools (seconds each to
start) are kept between the short tunings of a joint stage, and ends them on ``close``."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import tvm
import tvm.s_tir.meta_schedule as ms
from tvm.ir.utils import derived_object

from ..build import codegen
from .options import BUILD_TIMEOUT_S
from .records import short_error
from .rpc import RpcConfig
from .startup import import_tensor_intrinsics

__all__ = ["EVALUATOR", "COLD_EVALUATOR", "evaluator", "InProcessBuilder", "InProcessRunner", "Measurers",
           "built_within", "builds_left_running"]

#: how every candidate is timed, wherever it runs: three repeats of at least 20 ms each, so a
#: record's median (``records.latency_ms``) ranks layouts scored by a single measurement
EVALUATOR = ms.runner.EvaluatorConfig(number=1, repeat=3, min_repeat_ms=20)
#: ``TuneOptions(cold=True)``: the caches flushed of all but the first argument before each repeat,
#: which is then one call (a longer repeat would time warm calls after the first)
COLD_EVALUATOR = ms.runner.EvaluatorConfig(number=1, repeat=9, min_repeat_ms=0, enable_cpu_cache_flush=True)
#: a candidate whose first run takes this many times its task's best so far, and longer than one
#: of the evaluator's repeats (``min_repeat_ms``), is recorded with that run alone: it cannot
#: become the best, and timing it in full would take much of a tuning's time (measured:
#: benchmarks/results/2026-11-27-b128-names); a shorter run costs little anyway, and a cold first
#: call of a microsecond kernel can run 3x its best.
SLOW = 3.0
#: ... and longer than this, whatever the evaluator (the cold one has no minimum repeat)
SLOW_FLOOR_S = EVALUATOR.min_repeat_ms / 1e3


def evaluator(cold: bool) -> ms.runner.EvaluatorConfig:
    """How a tuning times its candidates: ``COLD_EVALUATOR`` or ``EVALUATOR``."""
    return COLD_EVALUATOR if cold else EVALUATOR


#: builds still running after their timeout (``built_within``), until they end
_LEFT: list[threading.Thread] = []


def builds_left_running() -> bool:
    """Whether a build that timed out is still running on its thread: a process should then end
    with ``os._exit`` (after flushing its output), as LLVM's static destructors at a normal exit
    would run under it."""
    _LEFT[:] = [t for t in _LEFT if t.is_alive()]
    return bool(_LEFT)


def built_within(mod: tvm.IRModule, target: tvm.target.Target, timeout_s: float) -> tvm.runtime.Module:
    """``codegen.build_candidate(mod, target)`` (MetaSchedule's ``default_build`` through our TIR
    pipeline) on a thread of its own, waited for at most ``timeout_s``;
    raises ``TimeoutError`` after it. A candidate that unrolls a large body can keep LLVM busy for
    tens of minutes (one of MetaSchedule's held a benchmark for 20): its thread cannot be stopped,
    so it is left to finish in the background in the idle scheduling class and its module is
    dropped (``builds_left_running``). Relies on TVM's FFI releasing the GIL during the build (its
    default; ``TVM_FFI_RELEASE_GIL_BY_DEFAULT=0`` would make the wait block); the caller's
    ``PassContext`` (thread-local) is carried over to the build's thread."""
    import_tensor_intrinsics()  # here, not inside the timeout: slow the first time
    context = tvm.transform.PassContext.current()
    got: dict[str, Any] = {}

    def build() -> None:
        try:
            with context:
                got["rt"] = codegen.build_candidate(mod, target)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            got["error"] = e

    worker = threading.Thread(target=build, name="candidate-build", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        _LEFT.append(worker)
        with contextlib.suppress(OSError, AttributeError):  # it would compete with the timings
            os.sched_setscheduler(worker.native_id, os.SCHED_IDLE, os.sched_param(0))
        raise TimeoutError(f"build took longer than {timeout_s:g} s")
    if "error" in got:
        raise got["error"]
    return got["rt"]


@derived_object
class InProcessBuilder(ms.builder.PyBuilder):
    """Builds candidates in this process and hands them to ``InProcessRunner`` in memory, through
    ``built`` (artifact path -> runtime module); ``scratch`` holds the folders that name them. A
    build that takes longer than ``timeout_s`` is recorded as failed (``built_within``)."""

    def __init__(self, built: dict[str, Any], scratch: Path, timeout_s: float = BUILD_TIMEOUT_S) -> None:
        super().__init__()
        self.built, self.scratch, self.timeout_s = built, scratch, timeout_s

    def build(self, build_inputs: list) -> list:
        out = []
        for bi in build_inputs:
            try:
                rt = built_within(bi.mod, bi.target, self.timeout_s)
            except Exception as e:  # a candidate TVM cannot build (in time): recorded with its error
                out.append(ms.builder.BuilderResult(None, f"build failed: {short_error(e)}"))
                continue
            self.scratch.mkdir(parents=True, exist_ok=True)  # someone may have cleaned /tmp meanwhile
            path = str(Path(tempfile.mkdtemp(dir=self.scratch)) / "module.mem")  # the runner's key
            self.built[path] = rt
            out.append(ms.builder.BuilderResult(path, None))
        return out


@derived_object
class InProcessRunner(ms.runner.PyRunner):
    """Times candidates built by the ``InProcessBuilder`` sharing ``built`` with TVM's own evaluator."""

    def __init__(self, config: ms.runner.EvaluatorConfig, built: dict[str, Any]) -> None:
        super().__init__()
        self.config, self.built = config, built
        self.best: float | None = None  # seconds: the median of the task's fastest candidate so far

    def start_task(self) -> None:
        """Forget the best so far: the candidates that follow are another task's."""
        self.best = None

    def run(self, runner_inputs: list) -> list:
        from tvm.s_tir.meta_schedule.runner import local_runner as lr

        out = []
        for ri in runner_inputs:
            rt = self.built.pop(str(ri.artifact_path), None)
            try:
                if rt is None:
                    raise RuntimeError("artifact not built by this runner's builder")
                dev = tvm.runtime.device(str(ri.device_type), 0)
                args = lr.default_alloc_argument(dev, tuple(a.as_json() for a in ri.args_info), 1)
                out.append(lr.LocalRunnerFuture(res=self._time(rt, dev, args)))
            except Exception as e:
                out.append(lr.LocalRunnerFuture(error_message=f"run failed: {short_error(e)}"))
        return out

    def _time(self, rt: Any, dev: Any, args: list) -> list[float]:
        """One plain run first (also the evaluator's warm-up); TVM's evaluator after it unless
        that run took ``SLOW`` times the best so far and longer than a repeat."""
        from tvm.s_tir.meta_schedule.runner import local_runner as lr

        func = rt[rt.entry_name]
        dev.sync()
        started = time.perf_counter()
        func(*args[0])
        dev.sync()
        first = time.perf_counter() - started
        if self.best is not None and first > max(SLOW * self.best, SLOW_FLOOR_S):
            return [first]
        costs = lr.default_run_evaluator(rt, dev, self.config, args)
        self.best = min(self.best or math.inf, statistics.median(costs))
        return costs


class Measurers:
    """A builder and a runner per kind of measurement, made on first use and kept until ``close``
    (also a context manager). Worker pools start in the calling process's environment: call
    ``pair`` inside ``startup.children_import_workbench``."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}
        self._scratch: Path | None = None
        self._builders: dict[float, ms.builder.LocalBuilder] = {}
        self._runners: dict[bool, ms.runner.LocalRunner] = {}  # by cold
        self.conversions: dict[int, float] = {}  # conversion kernel's structural hash -> ms (joint.ConversionCosts)

    def __enter__(self) -> Measurers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def pair(self, rpc: RpcConfig | None, isolated: bool, build_timeout_s: float,
             cold: bool = False) -> tuple[Any, Any]:
        """The builder and runner for a tuning: on ``rpc``'s servers (refused up front when it
        has none), else isolated in TVM's worker processes, else in this process; ``cold``: the
        runner times on flushed caches (``evaluator``)."""
        if rpc is None and not isolated:
            if self._scratch is None:
                self._scratch = Path(tempfile.mkdtemp(prefix="alt-wb-build-"))
            return (InProcessBuilder(self._built, self._scratch, float(build_timeout_s)),
                    InProcessRunner(evaluator(cold), self._built))
        if rpc is not None:
            servers = rpc.check()  # before any worker pool starts
            return self._local_builder(float(build_timeout_s)), rpc.runner(evaluator(cold), workers=servers)
        return self._local_builder(float(build_timeout_s)), self._local_runner(cold)

    def _local_builder(self, timeout_s: float) -> ms.builder.LocalBuilder:
        # one per timeout: its constructor starts a pool to check itself (seconds)
        if timeout_s not in self._builders:
            self._builders[timeout_s] = ms.builder.LocalBuilder(timeout_sec=timeout_s, f_build=codegen.BUILD_CANDIDATE,
                                                                initializer=import_tensor_intrinsics)
        return self._builders[timeout_s]

    def _local_runner(self, cold: bool) -> ms.runner.LocalRunner:
        # its worker pool (seconds to start) is kept between tunings
        if cold not in self._runners:
            self._runners[cold] = ms.runner.LocalRunner(evaluator_config=evaluator(cold),
                                                        initializer=import_tensor_intrinsics)
        return self._runners[cold]

    def close(self) -> None:
        """End the runner's worker pool and remove the scratch folder (idempotent)."""
        for runner in self._runners.values():
            runner.pool.shutdown()
        self._runners.clear()
        self._builders.clear()
        self._built.clear()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
