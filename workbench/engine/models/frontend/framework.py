"""A session's model run by the framework it came from, to check a replayed program end to end
against something other than the op library's own references: ONNX Runtime for an ONNX file,
PyTorch for a ``torch.export`` program (``.pt2``, also what a ``package.module:factory`` import
is saved as) and for the built-in networks. The project's own zoo graphs have no such source.

>>> framework_of({"zoo": "r18_stem"}) is None
True
>>> framework_of({"zoo": "resnet18"})
'PyTorch'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...base.errors import GraphError
from .sources import first_line

__all__ = ["framework_of", "framework_outputs"]


def framework_of(model: Mapping) -> str | None:
    """The framework that runs ``model`` (a session's "model" field), or None."""
    from ..zoo import NETWORKS

    if "zoo" in model:
        return "PyTorch" if model["zoo"] in NETWORKS else None
    if str(model["file"]).lower().endswith(".expr"):  # expression ops: their reference is ir.expr's interpreter
        return None
    return "ONNX Runtime" if str(model["file"]).lower().endswith(".onnx") else "PyTorch"


def framework_outputs(model: Mapping, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The model's outputs, in order, computed by ``framework_of(model)`` on ``inputs`` (in the
    order of the graph's inputs). Raises ``GraphError`` when it cannot run the model."""
    which = framework_of(model)
    if which is None:
        raise GraphError(f"{model.get('zoo')} is defined by the op library itself: no framework runs it")
    try:
        if "zoo" in model:
            outs = _torch_network(model, inputs)
        elif which == "ONNX Runtime":
            outs = _onnxruntime(str(model["file"]), inputs)
        else:
            outs = _exported_program(str(model["file"]), inputs)
    except GraphError:
        raise
    except Exception as e:  # noqa: BLE001 - each framework raises its own kinds
        raise GraphError(f"{which} could not run the model: {type(e).__name__}: {first_line(e)}") from None
    return [np.asarray(o, dtype=np.float32) for o in outs]


def _torch_network(model: Mapping, inputs: Sequence[np.ndarray]) -> list[Any]:
    from .. import networks

    module, _ = getattr(networks, model["zoo"])(**{k: v for k, v in model.items() if k != "zoo"})
    return _torch_call(module, inputs)


def _exported_program(path: str, inputs: Sequence[np.ndarray]) -> list[Any]:
    import torch

    return _torch_call(torch.export.load(path).module(), inputs)


def _torch_call(module: Any, inputs: Sequence[np.ndarray]) -> list[Any]:
    import torch

    with torch.no_grad():
        out = module(*(torch.from_numpy(np.ascontiguousarray(x)) for x in inputs))
    return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]


def _onnxruntime(path: str, inputs: Sequence[np.ndarray]) -> list[Any]:
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(inputs):
        raise GraphError(f"ONNX Runtime sees {len(names)} inputs ({', '.join(names)}), the graph {len(inputs)}")
    return sess.run(None, dict(zip(names, inputs)))
