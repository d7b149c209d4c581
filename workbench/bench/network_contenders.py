"""The networks benchmark's contenders other than ours and the engines: PyTorch eager, TVM's own
Relax pipelines (untuned, and MetaSchedule's), and what they all share: the seeded inputs (one
per input of the network: a decoder's token and K/V cache), the ONNX export and each output's
error against PyTorch's (a decoder layer returns the hidden states and its K/V cache)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from workbench.engine.base.interleave import Timer, call_timer

__all__ = ["network_inputs", "as_outputs", "max_error", "torch_outputs", "torch_timer", "relax_module", "vm_timer",
           "tvm_metaschedule_timer", "ours_per_task", "onnx_export", "onnx_input_names"]


def network_inputs(example: Sequence[Any], seed: int = 1) -> tuple[np.ndarray, ...]:
    """Seeded uniform [-1, 1) float32 inputs of the example inputs' shapes, in order."""
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1.0, 1.0, tuple(e.shape)).astype("float32") for e in example)


def as_outputs(out: Any) -> list[np.ndarray]:
    """A network's outputs as a list of arrays: one array, a tuple of them, or TVM tensors."""
    items = list(out) if isinstance(out, (list, tuple)) or not hasattr(out, "shape") else [out]
    return [np.asarray(o.numpy() if hasattr(o, "numpy") else o) for o in items]


def max_error(got: Any, want: Sequence[np.ndarray]) -> float:
    """The largest absolute difference over every output (``got`` as ``as_outputs`` takes it)."""
    got = as_outputs(got)
    if len(got) != len(want):
        raise ValueError(f"{len(got)} outputs where PyTorch has {len(want)}")
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - w))) for g, w in zip(got, want))


def torch_outputs(name: str, options: Mapping[str, int], xs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """Built-in network ``name``'s outputs in PyTorch: the reference every contender is held to."""
    import torch

    from workbench.engine.models import networks

    module, _ = getattr(networks, name)(**options)
    with torch.no_grad():
        return as_outputs(module(*(torch.from_numpy(x) for x in xs)))


def torch_timer(name: str, options: Mapping[str, int], xs: tuple[np.ndarray, ...], threads: int) -> Timer:
    """PyTorch eager on the network, the faster of NCHW and channels-last for an image network
    (made here: this runs in the timing sidecar)."""
    import torch

    from workbench.engine.models import networks

    module, _ = getattr(networks, name)(**options)
    torch.set_num_threads(threads)
    xts = tuple(torch.from_numpy(x) for x in xs)
    timers = []
    formats = [torch.contiguous_format] + ([torch.channels_last] if len(xts) == 1 and xts[0].dim() == 4 else [])
    for memory_format in formats:  # each format on a copy of its own: ``Module.to`` converts in place
        m = copy.deepcopy(module).to(memory_format=memory_format)
        xf = tuple(x.contiguous(memory_format=memory_format) for x in xts)

        def call(m=m, xf=xf) -> None:
            with torch.no_grad():
                m(*xf)

        timers.append(call_timer(call))
    return min(timers, key=lambda t: float(np.median([t() for _ in range(3)])))


def relax_module(module: Any, xs: tuple[np.ndarray, ...]) -> Any:
    """The module in Relax, batch norms folded into the convs as our importer does (otherwise
    TVM's kernels would carry four extra element-wise ops per conv and the comparison be unfair)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    from workbench.engine.models.frontend.translate import prepare

    ep = torch.export.export(module.eval(), tuple(torch.from_numpy(x) for x in xs))
    return prepare(from_exported_program(ep, unwrap_unit_return_tuple=True))


def vm_timer(mod: Any, target: dict, xs: tuple[np.ndarray, ...], pipeline: Any) -> tuple[Timer, list[np.ndarray]]:
    """``mod`` built by TVM with ``pipeline`` and run in the Relax VM: its timer and outputs."""
    import tvm
    from tvm import relax

    from workbench.engine.build.targets import target_from

    tgt = target_from(target)
    ex = tvm.compile(mod, target=tgt, relax_pipeline=pipeline(tgt) if callable(pipeline) else pipeline)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    args = [tvm.runtime.tensor(x) for x in xs]
    out = vm["main"](*args)
    return call_timer(lambda: vm["main"](*args)), as_outputs(out)


def tvm_metaschedule_timer(mod: Any, target: dict, xs: tuple[np.ndarray, ...], budget: int, work: Path,
                           per_task: int | None = None) -> tuple[Timer, list[np.ndarray]]:
    """TVM's ``relax.pipeline.static_shape_tuning_pipeline(..., cpu_weight_prepack=True)``, pass
    by pass, with MetaSchedule's own defaults but for three things, so that it gets a fair share:

    - its build and run workers start with the tensor intrinsics imported the light way
      (``startup.import_tensor_intrinsics``). With the default workers each build imports them
      itself, past the 30 s build timeout: every candidate failed and every kernel kept its
      default schedule;
    - each task gets ``per_task`` measurements (ours' per task, ``ours_per_task``; else budget /
      tasks), in one iteration: its default of 64 per iteration spends a budget of 64 on one task;
    - the weights' layout rewrite (``cpu_weight_prepack``: ``AttachAttrLayoutFreeBuffers`` before
      tuning, ``SplitLayoutRewritePreproc``, ``LiftTransformParams`` and ``FoldConstant`` after)
      is folded into the constants at build time, as the pipeline's docstring does for CPUs."""
    import tvm
    import tvm.s_tir.meta_schedule as ms
    from tvm import relax

    from workbench.engine.build.targets import target_from
    from workbench.engine.tuning.startup import children_import_workbench, import_tensor_intrinsics

    tgt, db = target_from(target), str(work / "tvm_metaschedule")
    import_tensor_intrinsics()
    with tgt:
        mod = tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                        relax.transform.CanonicalizeBindings(), relax.pipeline.zero_pipeline(),
                                        relax.transform.AttachAttrLayoutFreeBuffers()])(mod)
        tasks = max(1, len(ms.relax_integration.extract_tasks(mod, tgt)))
        per_task = per_task or max(1, budget // tasks)
        with children_import_workbench():
            ms.relax_integration.tune_relax(mod, {}, tgt, db, max_trials_global=per_task * tasks,
                                            max_trials_per_task=per_task, num_trials_per_iter=per_task,
                                            builder=ms.builder.LocalBuilder(initializer=import_tensor_intrinsics),
                                            runner=ms.runner.LocalRunner(initializer=import_tensor_intrinsics))
        mod = tvm.transform.Sequential([relax.transform.MetaScheduleApplyDatabase(db),
                                        relax.transform.SplitLayoutRewritePreproc(),
                                        relax.transform.LiftTransformParams(), relax.transform.FoldConstant()])(mod)
    return vm_timer(mod, target, xs, "default")


def ours_per_task(progress: Path) -> int | None:
    """Ours' measurements per tuned task, rounded up (from its progress file; None: none)."""
    from workbench.engine.tuning.progress import read_progress

    rows = [r for r in read_progress(progress) if r.get("task")]
    tasks = {r["task"] for r in rows}
    return -(-len(rows) // len(tasks)) if tasks else None


def onnx_input_names(count: int) -> list[str]:
    """The exported file's input names: ``x`` for the first (a one-input network's only one), then
    ``x1``, ``x2``, ... (the engines feed inputs by their session's names, in order)."""
    return ["x"] + [f"x{i}" for i in range(1, count)]


def onnx_export(module: Any, xs: tuple[np.ndarray, ...], path: Path) -> None:
    """The module exported to ONNX (opset 17, the TorchScript exporter), its warnings silenced:
    the exporter's deprecation and tracer notes are expected."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), tuple(torch.from_numpy(x) for x in xs), str(path), dynamo=False,
                          opset_version=17, input_names=onnx_input_names(len(xs)))
