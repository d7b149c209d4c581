"""The frameworks the app's whole network is held against (``session.network_time``): PyTorch
eager on a built-in network's ``torch.nn`` module, ONNX Runtime on that module exported to ONNX
or on an imported ONNX file.

The makers run in a timing sidecar (``library.Sidecar``: ``sidecar.timer(make, *args)``), never
in the app's server, where the frameworks' thread pools would share a process with TVM's and a
framework that crashed would take the server down. Each maker checks the framework's outputs
against the reference before it times anything; the timer's label carries their error relative
to the reference's largest magnitude (``relative_error``), read back with
``engines.label_error``: a label is all a sidecar hands back besides the samples.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..base.errors import BuildError
from ..base.interleave import Timer, call_timer

__all__ = ["SAMPLE_MS", "relative_error", "torch_eager_timer", "onnxruntime_timer", "exported_onnxruntime_timer"]

#: one timing sample of the network or a framework repeats its call for about this long, in ms
SAMPLE_MS = 20.0

Arrays = Mapping[str, np.ndarray]  # tensor name -> value, in the graph's order


def relative_error(got: Sequence[Any], want: Arrays) -> float:
    """The largest error of ``got`` (the outputs, in ``want``'s order) relative to the largest
    magnitude of the reference output it is compared with."""
    if len(got) != len(want):
        raise BuildError(f"{len(got)} outputs where the model has {len(want)}")
    errs = []
    for g, w in zip(got, want.values()):
        g = np.asarray(g, np.float64).reshape(w.shape)
        errs.append(float(np.max(np.abs(g - w))) / max(float(np.max(np.abs(w))), 1e-30))
    return max(errs)


def _checked(call: Callable[[], Sequence[Any]], want: Arrays) -> Timer:
    """A timer of ``call``, labelled with its outputs' ``relative_error`` (taken first)."""
    err = relative_error(call(), want)
    timer = call_timer(call, SAMPLE_MS)
    timer.label = repr(err)  # type: ignore[attr-defined]
    return timer


def _module(name: str, options: Mapping[str, Any]) -> Any:
    from ..models import networks

    module, _ = getattr(networks, name)(**options)
    return module.eval()


def _tensors(inputs: Arrays) -> tuple:
    import torch

    return tuple(torch.from_numpy(np.ascontiguousarray(v)) for v in inputs.values())


def torch_eager_timer(name: str, options: Mapping[str, Any], inputs: Arrays, threads: int, want: Arrays) -> Timer:
    """PyTorch eager on built-in network ``name`` (its zoo ``options``), ``threads`` threads."""
    import torch

    torch.set_num_threads(threads)
    module, xs = _module(name, options), _tensors(inputs)

    def call() -> list:
        with torch.no_grad():
            out = module(*xs)
        return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]

    return _checked(call, want)


def onnxruntime_timer(path: str | Path, inputs: Arrays, threads: int, want: Arrays) -> Timer:
    """ONNX Runtime on the ONNX file ``path`` (``engines.ort_session``), fed ``inputs`` in order."""
    from .engines import ort_session

    sess = ort_session(Path(path), threads)
    feed = {i.name: np.ascontiguousarray(v) for i, v in zip(sess.get_inputs(), inputs.values())}
    return _checked(lambda: sess.run(None, feed), want)


def exported_onnxruntime_timer(name: str, options: Mapping[str, Any], inputs: Arrays, threads: int,
                               want: Arrays) -> Timer:
    """ONNX Runtime on built-in network ``name`` exported to ONNX (TorchScript exporter, opset 17;
    the file is gone once the session holds the model)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer notes, expected here
            warnings.simplefilter("ignore")
            torch.onnx.export(_module(name, options), _tensors(inputs), str(path), dynamo=False, opset_version=17,
                              input_names=list(inputs))
        return onnxruntime_timer(path, inputs, threads, want)
