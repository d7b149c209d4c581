"""A replayed program as one runnable network, next to ``kernels.so``.

``replay`` writes ``network.so`` (the whole network as one Relax VM module, ``relaxnet``: plain
TVM runs it), ``network.json`` (the kernels in order, each with its argument buffers; every
buffer's stored shape; which buffers are the graph's inputs and outputs; ``vm``: how
``network.so`` is called) and ``constants.npz`` (the weights already in their stored layouts: an
imported model's own, a zoo model's seeded random ones, the very values the replay verified
with). ``load_network(REPLAY_DIR)`` gives a ``Network`` that runs ``network.so`` (a folder
written before it existed runs ``kernels.so`` kernel by kernel from Python): call it with NumPy
arrays or torch tensors (passed by DLPack, with no copy, when they are contiguous float32), get
the outputs in their original layouts. The command line is
``python -m workbench run REPLAY_DIR --input x.npy --out y.npy``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import tvm

from ..base.errors import BuildError, SessionError
from .lower import stored_constants
from .program import Program, first_error_line
from .relaxnet import NETWORK_SO

__all__ = ["NETWORK_FORMAT", "write_network", "load_network", "Network"]

NETWORK_FORMAT = "alt-workbench-network"


def write_network(program: Program, values: Mapping[str, np.ndarray], out_dir: str | Path,
                  vm: Mapping | None = None) -> None:
    """Write ``network.json`` and ``constants.npz`` of ``program`` (constants taken from
    ``values``, e.g. ``graph.random_inputs(seed)``) into ``out_dir``; ``vm`` is how
    ``network.so`` is called (``relaxnet.call_signature``), when one is written."""
    plan, graph = program.plan, program.graph
    inputs = {b.tensor: b.name for b in plan.buffers.values() if b.source == "input"}
    spec = {"format": NETWORK_FORMAT, "version": 1, "graph": graph.name,
            "kernels": [{"name": k.name, "args": [*k.inputs, *k.outputs]} for k in plan.kernels],
            "buffers": {b.name: list(b.layout.shape) for b in plan.buffers.values() if b.source != "input"},
            "inputs": {t: {"buffer": b, "shape": list(graph.tensors[t].shape)} for t, b in inputs.items()},
            "outputs": dict(plan.outputs), **({"vm": dict(vm)} if vm else {})}
    out = Path(out_dir)
    np.savez(out / "constants.npz", **stored_constants(plan, dict(values)))
    (out / "network.json").write_text(json.dumps(spec, indent=1) + "\n")


#: runs the network on the inputs (device tensors by input name); the outputs by name
Executor = Callable[[dict[str, tvm.runtime.Tensor]], dict[str, tvm.runtime.Tensor]]


@dataclass
class Network:
    """The whole tuned graph as one callable (see the module docstring); ``engine`` says what
    runs it: ``"relax-vm"`` (``network.so``) or ``"kernel-loop"`` (``kernels.so`` from Python)."""

    name: str
    inputs: dict[str, tuple[int, ...]]
    outputs: tuple[str, ...]
    engine: str
    _execute: Executor

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Run on the inputs (by position in ``inputs`` order, or by name); return each output,
        as torch tensors when the inputs were torch tensors, else as NumPy arrays."""
        given = dict(zip(self.inputs, args), **kwargs)
        if missing := [t for t in self.inputs if t not in given]:
            raise SessionError(f"{self.name}: missing input {', '.join(missing)} (inputs: {_shapes(self.inputs)})")
        if unknown := [t for t in given if t not in self.inputs]:
            raise SessionError(f"{self.name}: no input named {unknown[0]!r} (inputs: {_shapes(self.inputs)})")
        torch_in = any(type(v).__module__.startswith("torch") for v in given.values())
        outs = self._execute({t: _device(v, self.inputs[t], t) for t, v in given.items()})
        if torch_in:
            import torch

            return {t: torch.from_dlpack(v) for t, v in outs.items()}
        return {t: v.numpy() for t, v in outs.items()}


def _kernel_loop(spec: dict, lib: Any, consts: Mapping[str, np.ndarray]) -> Executor:
    """The kernels of ``kernels.so`` called one by one on buffers made once."""
    # zeros, as ``Built.run`` gives: a padded layout's margins are read as zeros
    bufs = {b: tvm.runtime.tensor(np.ascontiguousarray(consts[b], dtype="float32")) if b in consts
            else _zeros(shape) for b, shape in spec["buffers"].items()}

    def execute(given: dict[str, tvm.runtime.Tensor]) -> dict[str, tvm.runtime.Tensor]:
        now = dict(bufs)
        for t, v in given.items():
            now[spec["inputs"][t]["buffer"]] = v
        for b in spec["outputs"].values():  # fresh each call: the caller keeps what it got
            now[b] = _zeros(spec["buffers"][b])
        for k in spec["kernels"]:
            try:
                lib[k["name"]](*(now[a] for a in k["args"]))
            except Exception as e:  # noqa: BLE001 - TVM raises several types
                raise BuildError(f"kernel {k['name']} failed to run: {first_error_line(e)}") from None
        return {t: now[b] for t, b in spec["outputs"].items()}

    return execute


def _relax_vm(vm_spec: dict, mod: Any) -> Executor:
    """``network.so``'s ``main`` on the Relax VM (outputs fresh each call)."""
    main = tvm.relax.VirtualMachine(mod, tvm.cpu())["main"]
    order, outputs = list(vm_spec["inputs"]), list(vm_spec["outputs"])

    def execute(given: dict[str, tvm.runtime.Tensor]) -> dict[str, tvm.runtime.Tensor]:
        try:
            got = main(*(given[t] for t in order))
        except Exception as e:  # noqa: BLE001 - TVM raises several types
            raise BuildError(f"{NETWORK_SO} failed to run: {first_error_line(e)}") from None
        return dict(zip(outputs, got))

    return execute


def _zeros(shape: list[int]) -> tvm.runtime.Tensor:
    return tvm.runtime.tensor(np.zeros(tuple(shape), "float32"))


def _shapes(inputs: Mapping[str, tuple[int, ...]]) -> str:
    return ", ".join(f"{t} {tuple(s)}" for t, s in inputs.items())


def _device(value: Any, shape: tuple[int, ...], name: str) -> tvm.runtime.Tensor:
    """A tensor TVM can pass: torch tensors by DLPack when contiguous float32 on the CPU."""
    if type(value).__module__.startswith("torch"):
        if str(value.dtype) == "torch.float32" and value.is_contiguous() and value.device.type == "cpu":
            tensor = tvm.runtime.from_dlpack(value.detach())
            if tuple(tensor.shape) == tuple(shape):
                return tensor
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if tuple(arr.shape) != tuple(shape):
        raise SessionError(f"input {name} has shape {tuple(arr.shape)}; the network takes {tuple(shape)}")
    if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.integer):
        raise SessionError(f"input {name} has dtype {arr.dtype}; the network takes float32")
    return tvm.runtime.tensor(np.ascontiguousarray(arr, dtype="float32"))


def load_network(replay_dir: str | Path) -> Network:
    """The network a replay wrote to ``replay_dir``: ``network.so`` with ``network.json``, or
    (a folder written before ``network.so`` existed) ``kernels.so``, ``network.json`` and
    ``constants.npz``. Raises ``SessionError`` naming what is missing or malformed."""
    d = Path(replay_dir)
    spec = _spec(d)
    inputs = {t: tuple(v["shape"]) for t, v in spec["inputs"].items()}
    name = spec.get("graph", d.name)
    if (d / NETWORK_SO).is_file() and "vm" in spec:
        return Network(name, inputs, tuple(spec["vm"]["outputs"]), "relax-vm",
                       _relax_vm(spec["vm"], tvm.runtime.load_module(str(d / NETWORK_SO))))
    if missing := [f for f in ("kernels.so", "constants.npz") if not (d / f).is_file()]:
        raise SessionError(f"{d} is not a replay folder with a runnable network: no {NETWORK_SO}, "
                           f"{', '.join(missing)} (run `python -m workbench replay SESSION --out DIR` first)")
    with np.load(d / "constants.npz") as npz:
        consts = {k: npz[k] for k in npz.files}
    return Network(name, inputs, tuple(spec["outputs"]), "kernel-loop",
                   _kernel_loop(spec, tvm.runtime.load_module(str(d / "kernels.so")), consts))


def _spec(d: Path) -> dict:
    if not (d / "network.json").is_file():
        raise SessionError(f"{d} is not a replay folder with a runnable network: no network.json "
                           "(run `python -m workbench replay SESSION --out DIR` first)")
    try:
        spec = json.loads((d / "network.json").read_text())
        ok = spec.get("format") == NETWORK_FORMAT and all(k in spec for k in ("kernels", "buffers", "inputs", "outputs"))
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise SessionError(f"{d / 'network.json'} is not a network description written by replay")
    return spec
