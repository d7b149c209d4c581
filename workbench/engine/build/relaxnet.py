"""A scheduled program as ONE Relax VM module: ``network.so``, which plain TVM runs.

``network_module`` writes the plan as a Relax ``main``: its parameters are the graph inputs in
their original layouts, each kernel is an ``R.call_tir`` of its scheduled PrimFunc (the input
conversions the plan needs are kernels of the plan already), the weights are constants in their
stored layouts, and it returns the tuple of the graph outputs (as stored). ``build_network``
compiles it with a minimal Relax pipeline: no legalization, no fusion, nothing that rewrites a
kernel; the intermediates go through Relax's static memory planning (``StaticPlanBlockMemory``),
and the kernels through our TIR pipeline (``codegen.PIPELINE``), as ``kernels.so`` does.

Running it needs nothing of the workbench::

    mod = tvm.runtime.load_module("network.so")
    outs = tvm.relax.VirtualMachine(mod, tvm.cpu())["main"](*inputs)   # a tuple, graph-output order
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping

import numpy as np
import tvm
from tvm import relax

from . import codegen
from ..base.errors import BuildError, first_line
from .lower import stored_constants
from .program import Program
from .targets import DEFAULT_TARGET, target_from
from .threads import single_threaded

__all__ = ["NETWORK_SO", "MemoryPlan", "RelaxNetwork", "network_module", "planned_module", "memory_plan",
           "build_network", "call_signature"]

#: the file ``replay`` writes the network to
NETWORK_SO = "network.so"

#: the Relax passes that take ``call_tir`` to VM code (TVM's default build pipeline without
#: ``LegalizeOps``, ``RewriteDataflowReshape`` and the dispatchers: the kernels stay as scheduled)
_PLAN = (relax.transform.ToNonDataflow, relax.transform.RemovePurityChecking, relax.transform.CallTIRRewrite,
         relax.transform.StaticPlanBlockMemory)
_LOWER = (relax.transform.LowerAllocTensor, relax.transform.KillAfterLastUse, relax.transform.LowerRuntimeBuiltin,
          relax.transform.ComputePrimValue, relax.transform.VMShapeLower, relax.transform.AttachGlobalSymbol)
_BYTES = 4  # every buffer is float32


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes of the network's tensors: ``planned_bytes`` is the sum of the storage blocks Relax's
    static memory planning allocates for the intermediates (all alive at once: the peak);
    ``intermediate_bytes`` the sum of the intermediate buffers (what one buffer each needs);
    ``output_bytes`` the outputs (fresh each call); ``constant_bytes`` the weights. Kernels'
    own scratch space is not counted."""

    planned_bytes: int
    intermediate_bytes: int
    output_bytes: int
    constant_bytes: int
    storage_blocks: int
    intermediates: int

    def row(self) -> dict:
        return {"peak_planned_mb": self.planned_bytes / 2**20, "intermediates_sum_mb": self.intermediate_bytes / 2**20,
                "outputs_mb": self.output_bytes / 2**20, "constants_mb": self.constant_bytes / 2**20,
                "storage_blocks": self.storage_blocks, "intermediates": self.intermediates,
                "how": "sum of the planned storage allocations (Relax StaticPlanBlockMemory), not measured RSS"}


@dataclass
class RelaxNetwork:
    """The built network: the executable (``export_library`` writes ``network.so``), its memory
    plan, and the order of ``main``'s parameters and results."""

    executable: Any
    memory: MemoryPlan
    inputs: dict[str, tuple[int, ...]]
    outputs: dict[str, tuple[int, ...]]

    def vm(self) -> relax.VirtualMachine:
        return relax.VirtualMachine(self.executable, tvm.cpu())

    def args(self, values: Mapping[str, np.ndarray]) -> list[tvm.runtime.Tensor]:
        """``main``'s arguments: the graph inputs of ``values``, in order."""
        return [tvm.runtime.tensor(np.ascontiguousarray(values[t], dtype="float32")) for t in self.inputs]

    def run(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every graph output (as stored) for the graph inputs in ``values``."""
        return dict(zip(self.outputs, (o.numpy() for o in self.vm()["main"](*self.args(values)))))

    def export(self, path: str) -> None:
        try:
            self.executable.export_library(path)
        except Exception as e:  # noqa: BLE001 - the toolchain's errors come in several types
            raise BuildError(f"could not export {path}: {first_line(e)}") from None


def _tensor_type(shape: tuple[int, ...]) -> relax.TensorType:
    return relax.TensorType([int(s) for s in shape], "float32")


def _size(shape) -> int:
    return int(np.prod([int(s) for s in shape], dtype=np.int64)) * _BYTES


def network_module(program: Program, values: Mapping[str, np.ndarray],
                   single_thread: Collection[str] = ()) -> tvm.IRModule:
    """``program`` as a Relax module (see the module docstring); constants from ``values`` (e.g.
    ``graph.random_inputs(seed)``). The kernels named in ``single_thread`` (e.g. the program's
    ``threads.tiny_kernels``) run on the calling thread alone. Raises ``BuildError`` when the plan
    is not a chain of pure kernels (a buffer read before any kernel writes it, or written twice)."""
    plan, graph = program.plan, program.graph
    alone = set(single_thread)
    by_tensor = {b.tensor: b.name for b in plan.buffers.values() if b.source == "input"}
    params = {t: relax.Var(t, _tensor_type(graph.tensors[t].shape)) for t in graph.inputs if t in by_tensor}
    env: dict[str, relax.Expr] = {by_tensor[t]: v for t, v in params.items()}
    env.update({b: relax.const(np.ascontiguousarray(a, dtype="float32"))
                for b, a in stored_constants(plan, dict(values)).items()})
    bb = relax.BlockBuilder()
    with bb.function("main", list(params.values())):
        with bb.dataflow():
            for k in plan.kernels:
                if missing := [b for b in k.inputs if b not in env]:
                    raise BuildError(f"kernel {k.name} reads {missing[0]}, which no earlier kernel writes")
                if again := [b for b in k.outputs if b in env]:
                    raise BuildError(f"kernel {k.name} writes {again[0]} again: not a network of pure kernels")
                func = single_threaded(program.funcs[k.name]) if k.name in alone else program.funcs[k.name]
                gv = bb.add_func(func.with_attr("global_symbol", k.name), k.name)
                types = [_tensor_type(plan.buffers[b].layout.shape) for b in k.outputs]
                call = bb.emit(relax.call_tir(gv, [env[b] for b in k.inputs], types if len(types) > 1 else types[0]))
                for i, b in enumerate(k.outputs):
                    env[b] = call if len(types) == 1 else bb.emit(relax.TupleGetItem(call, i))
            out = bb.emit_output(relax.Tuple([env[plan.outputs[t]] for t in graph.outputs]))
        bb.emit_func_output(out)
    return bb.get()


def _passes(mod: tvm.IRModule, passes: tuple, tgt: tvm.target.Target) -> tvm.IRModule:
    with tgt:
        return tvm.transform.Sequential([p() for p in passes])(mod)


def planned_module(mod: tvm.IRModule, target: Mapping | tvm.target.Target = DEFAULT_TARGET) -> tvm.IRModule:
    """``mod`` (a ``network_module``) after the passes up to static memory planning."""
    return _passes(mod, _PLAN, target if isinstance(target, tvm.target.Target) else target_from(target))


def memory_plan(planned: tvm.IRModule, program: Program) -> MemoryPlan:
    """The storage ``planned`` (after ``StaticPlanBlockMemory``) allocates, against the buffers."""
    alloc = tvm.ir.Op.get("relax.memory.alloc_storage")
    storage = [b.value.args[0].values[0] for blk in planned["main"].body.blocks for b in blk.bindings
               if isinstance(b.value, relax.Call) and b.value.op.same_as(alloc)]
    plan = program.plan
    sizes = {b.name: _size(b.layout.shape) for b in plan.buffers.values()}
    outs = set(plan.outputs.values())
    # the tensors between kernels (a kernel's own stages live inside its PrimFunc)
    inter = {b for k in plan.kernels for b in k.outputs} - outs
    return MemoryPlan(sum(int(s) for s in storage), sum(sizes[n] for n in inter), sum(sizes[n] for n in outs),
                      sum(sizes[b.name] for b in plan.buffers.values() if b.source == "const"), len(storage), len(inter))


def build_network(program: Program, values: Mapping[str, np.ndarray],
                  target: Mapping | tvm.target.Target = DEFAULT_TARGET,
                  single_thread: Collection[str] = ()) -> RelaxNetwork:
    """Build ``network_module(program, values, single_thread)`` for ``target``. Raises ``BuildError``."""
    tgt = target if isinstance(target, tvm.target.Target) else target_from(target)
    mod = network_module(program, values, single_thread)
    try:
        planned = planned_module(mod, tgt)
        ex = tvm.compile(_passes(planned, _LOWER, tgt), target=tgt, relax_pipeline=None,
                         tir_pipeline=codegen.PIPELINE)
    except Exception as e:  # noqa: BLE001 - TVM raises several types
        raise BuildError(f"the network module failed to build: {first_line(e)}") from None
    graph, plan = program.graph, program.plan
    ins = {v.name: tuple(int(s) for s in v.ty.shape) for v in mod["main"].params}
    outs = {t: tuple(plan.buffers[plan.outputs[t]].layout.shape) for t in graph.outputs}
    return RelaxNetwork(ex, memory_plan(planned, program), ins, outs)


def call_signature(net: RelaxNetwork) -> dict:
    """How plain TVM calls ``network.so`` (for report.json and network.json)."""
    return {"file": NETWORK_SO, "inputs": {t: list(s) for t, s in net.inputs.items()},
            "outputs": {t: list(s) for t, s in net.outputs.items()}, "dtype": "float32",
            "call": "vm = tvm.relax.VirtualMachine(tvm.runtime.load_module('network.so'), tvm.cpu()); "
                    "outs = vm['main'](*inputs)  # inputs as tvm.runtime.tensor, in 'inputs' order; "
                    "outs: a tuple in 'outputs' order"}
