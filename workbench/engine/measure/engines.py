"""The inference engines a whole network is held against, set up as a user would run them on a
CPU, and what they tell of themselves (per-node profiles, peak memory).

- ONNX Runtime: all graph optimizations (``ORT_ENABLE_ALL``), sequential execution, intra-op
  threads = cores;
- OpenVINO: f32 forced (``INFERENCE_PRECISION_HINT``), ``PERFORMANCE_HINT`` LATENCY,
  ``INFERENCE_NUM_THREADS`` = cores, one stream;
- ``torch.compile``: inductor with freezing and the options of ``max-autotune-no-cudagraphs``
  (``library.COMPILE_MODE``), channels-last for a CNN, under ``no_grad``.

The ``*_timer`` makers run in the timing sidecar (``library.Sidecar``), which hands back a
timer's ``label`` only: the outputs' largest absolute error against ``want`` (one array or a list),
read back with ``label_error``; ``x`` is the input or a tuple of them in the network's order.
``profiles`` and ``onnxruntime_peak_mb`` run in a process of their own (``in_fresh_process``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .byop import OnnxNode, engine_to_onnx, ort_node_times
from ..base.interleave import Timer, call_timer
from .library import spawnable_main

__all__ = ["ort_session", "onnxruntime_timer", "openvino_model", "openvino_timer", "torch_compile_timer",
           "label_error", "onnx_nodes", "profiles", "onnxruntime_peak_mb", "in_fresh_process"]


Inputs = np.ndarray | tuple  # one input, or a network's inputs in order


def _listed(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _checked(timer: Timer, got: Any, want: np.ndarray | list[np.ndarray]) -> Timer:
    errs = [float(np.max(np.abs(np.asarray(g, np.float64) - w))) for g, w in zip(_listed(got), _listed(want))]
    timer.label = repr(max(errs))  # type: ignore[attr-defined]
    return timer


def _feed(sess: Any, x: Inputs) -> dict[str, np.ndarray]:
    """ONNX Runtime's feed: the inputs by the session's input names, in order."""
    return {i.name: v for i, v in zip(sess.get_inputs(), _listed(x))}


def label_error(label: str) -> float | None:
    """The output error an engine timer's label carries (None: not a number)."""
    try:
        return float(label)
    except (TypeError, ValueError):
        return None


def ort_session(path: Path, threads: int, profile_prefix: str | None = None,
                optimized: Path | None = None) -> Any:
    """An ONNX Runtime CPU session as set up for the benchmark (module docstring); with
    ``profile_prefix``, profiling on; with ``optimized``, the optimized graph written there."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # the hardware-specific optimized-graph warning is expected
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    if optimized:
        opts.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def onnxruntime_timer(path: Path, x: Inputs, threads: int, want: np.ndarray | list[np.ndarray]) -> Timer:
    """ONNX Runtime on the exported file (``ort_session``)."""
    sess = ort_session(path, threads)
    feed = _feed(sess, x)
    got = sess.run(None, feed)
    return _checked(call_timer(lambda: sess.run(None, feed)), got, want)


def openvino_model(path: Path, threads: int, perf_count: bool = False) -> Any:
    """The ONNX file compiled by OpenVINO for the CPU as set up for the benchmark."""
    import openvino as ov

    config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
              "NUM_STREAMS": 1, "PERF_COUNT": perf_count}
    return ov.Core().compile_model(str(path), "CPU", config)


def openvino_timer(path: Path, x: Inputs, threads: int, want: np.ndarray | list[np.ndarray]) -> Timer:
    """OpenVINO on the exported file (``openvino_model``), one infer request."""
    request = openvino_model(path, threads).create_infer_request()
    feed = dict(enumerate(_listed(x)))
    request.infer(feed)
    got = [np.array(request.get_output_tensor(i).data) for i in range(len(_listed(want)))]
    return _checked(call_timer(lambda: request.infer(feed)), got, want)


def torch_compile_timer(name: str, options: dict, x: Inputs, threads: int,
                        want: np.ndarray | list[np.ndarray]) -> Timer:
    """``torch.compile`` of built-in network ``name`` (module docstring); the compile happens in
    the first call, inside this maker."""
    import torch
    from torch import _inductor

    from ..models import networks
    from .library import COMPILE_MODE

    torch.set_num_threads(threads)
    module, _ = getattr(networks, name)(**options)
    xts = [torch.from_numpy(v) for v in _listed(x)]
    if len(xts) == 1 and xts[0].dim() == 4:  # a CNN: inductor's convolutions want channels-last
        module, xts = module.to(memory_format=torch.channels_last), [xts[0].contiguous(memory_format=torch.channels_last)]
    compiled = torch.compile(module.eval(), backend="inductor",
                             options={**_inductor.list_mode_options(COMPILE_MODE), "freezing": True})

    def call() -> Any:
        with torch.no_grad():
            return compiled(*xts)

    got = [o.numpy() for o in _listed(call())]
    return _checked(call_timer(call), got, want)


def onnx_nodes(path: Path) -> list[OnnxNode]:
    """The nodes of an ONNX file in graph order (Constant nodes left out: no engine runs them)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [OnnxNode(n.name or n.output[0], n.op_type, tuple(n.output), tuple(n.input))
            for n in graph.node if n.op_type != "Constant"]


def _ort_profile(path: Path, x: Inputs, threads: int, runs: int, tmp: Path) -> dict:
    sess = ort_session(path, threads, profile_prefix=str(tmp / "ort"), optimized=tmp / "optimized.onnx")
    feed = _feed(sess, x)
    for _ in range(runs):
        sess.run(None, feed)
    trace = json.loads(Path(sess.end_profiling()).read_text())
    times = ort_node_times(trace)
    optimized = onnx_nodes(tmp / "optimized.onnx")
    return {"times": times, "to_onnx": engine_to_onnx(optimized, onnx_nodes(path))}


def _ov_profile(path: Path, x: Inputs, threads: int, runs: int) -> dict:
    """OpenVINO's per-layer counters. Each counter is the mean over every infer of the request so
    far, the first (slow) one included: the ms per run is taken from the counters' growth over
    ``runs`` infers after ``runs`` warm-up ones."""
    compiled = openvino_model(path, threads, perf_count=True)
    request = compiled.create_infer_request()
    feed = dict(enumerate(_listed(x)))

    def counters() -> dict[str, float]:
        request.infer(feed)
        return {p.node_name: p.real_time.total_seconds() * 1e3 for p in request.get_profiling_info()}

    for _ in range(runs - 1):
        request.infer(feed)
    warm = counters()
    for _ in range(runs - 1):
        request.infer(feed)
    done = counters()
    times = {n: max(0.0, 2 * ms - warm.get(n, 0.0)) for n, ms in done.items() if ms > 0}  # the second half's mean
    fused, executed = {}, []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        name = op.get_friendly_name()
        executed.append(_ov_node(op, name, str(info["layerType"]) if "layerType" in info else ""))
        if "originalLayersNames" in info:
            fused[name] = [s for s in str(info["originalLayersNames"]).split(",") if s]
    return {"times": times, "to_onnx": engine_to_onnx(executed, onnx_nodes(path), fused)}


def _ov_node(op: Any, name: str, op_type: str) -> OnnxNode:
    """An OpenVINO runtime op as a node: its outputs are its tensors' names and ``NAME:INDEX``
    handles, which its consumers' inputs name."""
    outs = [t for o in op.outputs() for t in sorted(o.get_names())] + [f"{name}:{i}" for i in range(len(op.outputs()))]
    ins = [f"{i.get_source_output().get_node().get_friendly_name()}:{i.get_source_output().get_index()}"
           for i in op.inputs()]
    return OnnxNode(name, op_type, tuple(outs), tuple(ins))


def profiles(path: Path, x: Inputs, threads: int, runs: int = 10) -> dict[str, dict]:
    """Each engine's own per-node profile of the ONNX file: engine -> {"times": node -> median ms
    per run, "to_onnx": node -> ONNX node (``byop.engine_to_onnx``)}, or {"error": why}."""
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for engine, make in (("onnxruntime", lambda: _ort_profile(path, x, threads, runs, Path(tmp))),
                             ("openvino", lambda: _ov_profile(path, x, threads, runs))):
            try:
                out[engine] = make()
            except Exception as e:  # noqa: BLE001 - an engine that cannot profile is named, the others still are
                out[engine] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
    return out


def _status_mb(field: str) -> float:
    """A ``/proc/self/status`` figure (VmRSS, VmHWM: the address space's peak RSS) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise OSError(f"/proc/self/status has no {field}")


def onnxruntime_peak_mb(path: Path, x: Inputs, threads: int) -> float:
    """ONNX Runtime's peak memory for the file (Linux): the process's peak RSS while a session is
    made and run once, less its RSS before (weights, arena, intermediates and the session's
    threads' stacks). The peak is reset first (``clear_refs`` 5), so any process will do."""
    import onnxruntime  # noqa: F401 - the library's own pages count in the baseline, not the model's

    Path("/proc/self/clear_refs").write_text("5")
    before = _status_mb("VmRSS")
    sess = ort_session(path, threads)
    sess.run(None, _feed(sess, x))
    return _status_mb("VmHWM") - before


def in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a spawned process of its own (``fn``: module level, so that it pickles)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with spawnable_main():  # the worker starts on the first submit
            future = pool.submit(fn, *args)
        return future.result()
