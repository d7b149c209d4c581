"""Where imported models come from: ONNX files, torch.export archives (``.pt2``), Python
factories (``package.module:function``) and in-memory ``nn.Module``s; each becomes a Relax
module through TVM's frontends, then a ``Graph`` (``convert``).

Trust: ONNX is protobuf and parses without running code. A ``.pt2`` does not: ``torch.export.load``
unpickles (its sample inputs fall back to ``torch.load(weights_only=False)`` when the safe
loader refuses them; pickled weights and opaque constants are loaded the same way) and parses
symbolic shapes with sympy, so a crafted archive can run code. ``.pt2`` files are therefore
imported only from the local disk (the CLI, sessions pinned to a file's sha256), never from an
upload: ``check_upload`` refuses them. A factory is code the user runs on purpose.

A model file is hashed (with its external data, for ONNX) before it is parsed, so a session
names exactly the bytes it was made from.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import io
import re
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import tvm

from ...base.errors import GraphError, first_line
from ...ir.expr import ExprFile, backward_graph, expr_graph, read_expr
from ...ir.expr.backward import grad_name
from ...base.files import write_atomic
from ...ir.graph import Graph
from .translate import prepare, to_graph

__all__ = ["MAX_MODEL_MB", "FORMATS", "UPLOAD_FORMATS", "Shapes", "import_file", "input_shapes", "import_module",
           "export_factory", "read_model", "check_upload", "store_upload", "parse_input", "first_line",
           "backward_inputs"]

#: a model file (with its external data) larger than this is refused before it is read (not 512:
#: Streamlit's uploader prints 512 MiB as "1GB per file", beside our "at most 512 MB")
MAX_MODEL_MB = 500
FORMATS = {".onnx": "ONNX", ".pt2": "torch.export", ".expr": "expression ops"}
#: what the app may accept from an upload (``.pt2`` unpickles: see the module docstring)
UPLOAD_FORMATS = (".onnx",)
_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

#: input name -> static shape
Shapes = Mapping[str, Sequence[int]]


@contextmanager
def _quiet():
    """torch and TVM's frontends warn about their own deprecations: not the user's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


def parse_input(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=1,3,224,224`` -> ``("NAME", (1, 3, 224, 224))``."""
    name, sep, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or min(shape) < 1:
        raise GraphError(f"--input {text!r}: write NAME=D1,D2,... with positive dims, e.g. data=1,3,224,224")
    return name, shape


########## Files: size, hash, format ##########

def _size_check(path: Path, extra: int = 0) -> None:
    size = path.stat().st_size + extra
    if size > MAX_MODEL_MB << 20:
        raise GraphError(f"{path.name} is {size / 2**20:.0f} MB, over the {MAX_MODEL_MB} MB limit for a model")


def _format(path: Path) -> str:
    if path.suffix.lower() not in FORMATS:
        raise GraphError(f"{path.name}: unknown model format {path.suffix or '(no suffix)'!r}; the workbench imports "
                         f"{', '.join(FORMATS)} files or a Python factory package.module:function")
    return path.suffix.lower()


def read_model(path: str | Path) -> tuple[bytes, dict[str, bytes], str]:
    """The model file's bytes, its ONNX external data files (location -> bytes) and the sha256 of
    all of them, size-checked before reading. Raises ``GraphError`` for a missing file."""
    path = Path(path)
    if not path.is_file():
        raise GraphError(f"model file {path} does not exist")
    suffix = _format(path)
    _size_check(path)
    data = path.read_bytes()
    extern = _onnx_external(path, data) if suffix == ".onnx" else {}
    digest = hashlib.sha256(data)
    for loc in sorted(extern):
        digest.update(loc.encode() + b"\0" + extern[loc])
    return data, extern, digest.hexdigest()


def _onnx_external(path: Path, data: bytes) -> dict[str, bytes]:
    """External data files an ONNX model names: plain names in the model's folder only."""
    model = _parse_onnx(data, path.name)
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    locs = {next((e.value for e in t.external_data if e.key == "location"), "")
            for t in _get_all_tensors(model) if uses_external_data(t)}
    out: dict[str, bytes] = {}
    total = 0
    for loc in sorted(locs):
        f = path.parent / loc
        if not loc or Path(loc).name != loc or not f.is_file():
            raise GraphError(f"{path.name}: its external data {loc!r} must be a file beside it")
        total += f.stat().st_size
        _size_check(path, total)
        out[loc] = f.read_bytes()
    return out


def check_upload(filename: str, data: bytes) -> None:
    """Refuse an upload the app must not import: a format other than ONNX (a ``.pt2`` unpickles,
    see the module docstring), a file over the size limit, or an ONNX model whose weights live
    in a separate file."""
    suffix = Path(filename).suffix.lower()
    if suffix == ".pt2":
        raise GraphError(f"{filename}: a .pt2 file is not accepted as an upload, since loading it unpickles data and "
                         "can run code; export the model to ONNX, or import the .pt2 with the command line")
    if suffix not in UPLOAD_FORMATS:
        raise GraphError(f"{filename}: uploads must be ONNX files ({', '.join(UPLOAD_FORMATS)})")
    if len(data) > MAX_MODEL_MB << 20:
        raise GraphError(f"{filename} is {len(data) / 2**20:.0f} MB, over the {MAX_MODEL_MB} MB limit for a model")
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    if any(uses_external_data(t) for t in _get_all_tensors(_parse_onnx(data, filename))):
        raise GraphError(f"{filename} keeps its weights in a separate file: upload a single-file model "
                         "(torch.onnx.export(..., external_data=False))")


def store_upload(filename: str, data: bytes, folder: str | Path) -> Path:
    """Check an uploaded model (``check_upload``) and keep it in ``folder`` under a name with its
    content's hash, written atomically, so that a session pins it like any model file (the same
    upload is stored once; a different one never overwrites it)."""
    check_upload(filename, data)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(filename).stem).lstrip("_.-")[:60] or "model"
    path = Path(folder) / f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}{Path(filename).suffix.lower()}"
    if not path.is_file() or path.read_bytes() != data:
        write_atomic(path, data)
    return path


def import_file(path: str | Path, inputs: Shapes | None = None, name: str | None = None,
                model: tuple[bytes, Mapping[str, bytes]] | None = None) -> Graph:
    """Import an ``.onnx``, ``.pt2`` or ``.expr`` file (``model``: its bytes and external data,
    already read by ``read_model``). ``inputs`` gives static shapes (needed for dynamic dims); a
    ``.expr`` file given ``grad_<output>`` shapes too (``backward_inputs``) comes with its backward pass."""
    path = Path(path)
    suffix = _format(path)
    program, declared = _load(path, model, inputs or {})
    shapes = _resolve(declared, inputs or {}, path.name)
    name = name or re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem)[:80] or "model"
    if suffix == ".expr":  # expression ops (engine.expr): no framework, no Relax
        forward = {k: v for k, v in shapes.items() if k in program.inputs}
        graph = expr_graph(program, name, f"Expression ops from {path.name}.", forward, path.name)
        if program.train:  # the file asks for its SGD training step (forward, loss, backward, update)
            from ..training import training_step
            try:
                return training_step(graph, program.train, program.lr).graph
            except GraphError as e:
                raise GraphError(f"{path.name}: {e}") from None
        if len(forward) == len(shapes):
            return graph
        try:
            return backward_graph(graph)
        except GraphError as e:
            raise GraphError(f"{path.name}: {e}") from None
    mod = _onnx_relax(program, shapes, path.name) if suffix == ".onnx" else _exported_relax(program, path.name, shapes)
    return _graph(mod, name, f"{FORMATS[suffix]} model imported from {path.name}.", path.name)


def input_shapes(path: str | Path, inputs: Shapes | None = None,
                 model: tuple[bytes, Mapping[str, bytes]] | None = None) -> dict[str, tuple[int, ...]]:
    """Every input of the model file with its static shape (``inputs`` completing dynamic dims),
    as ``import_file`` would use them; nothing is converted."""
    path = Path(path)
    return _resolve(_load(path, model, inputs or {})[1], inputs or {}, path.name)


def backward_inputs(path: str | Path, inputs: Shapes | None = None,
                    model: tuple[bytes, Mapping[str, bytes]] | None = None) -> dict[str, tuple[int, ...]]:
    """``input_shapes`` of a ``.expr`` file with its backward pass: its inputs, then
    ``grad_<output>`` for every output. Given to ``import_file``, they import the graph with
    its derived gradients (a session's inputs name them, so replaying it rebuilds them)."""
    path = Path(path)
    if path.suffix.lower() != ".expr":
        raise GraphError(f"{path.name}: gradients are derived for expression ops only: give a .expr file")
    parsed = _load(path, model, {})[0]
    return _resolve(_expr_inputs(parsed, inputs or {}, path.name, backward=True), inputs or {}, path.name)


def _expr_inputs(parsed: ExprFile, given: Shapes, what: str, backward: bool = False) -> dict[str, list]:
    """A ``.expr`` file's inputs, then with its ``backward`` pass (or when ``given`` names one of
    them: ``backward_inputs``) ``grad_<output>`` for each output."""
    declared = {k: list(v) for k, v in parsed.inputs.items()}
    if backward or any(k.startswith("grad_") and k not in declared for k in given):
        graph = expr_graph(parsed, "forward", inputs={k: v for k, v in given.items() if k in declared}, what=what)
        try:
            backward_graph(graph)  # derived here too, so that a name it would take is refused up front
        except GraphError as e:
            raise GraphError(f"{what}: {e}") from None
        declared.update({grad_name(o): list(graph.tensors[o].shape) for o in graph.outputs})
    return declared


def _load(path: Path, model: tuple[bytes, Mapping[str, bytes]] | None,
          given: Shapes) -> tuple[Any, dict[str, list]]:
    """The parsed model (an ONNX ``ModelProto``, an ``ExportedProgram`` or an ``ExprFile``) and
    its declared inputs (``given``: the shapes asked for)."""
    data, extern = model if model is not None else read_model(path)[:2]
    if _format(path) == ".expr":
        parsed = read_expr(data, path.name)
        return parsed, _expr_inputs(parsed, given, path.name)
    if _format(path) == ".onnx":
        proto = _onnx_model(data, extern, path.name)
        return proto, _onnx_inputs(proto, path.name)
    ep = _pt2_program(data, path.name)
    return ep, _ep_inputs(ep, path.name)


def _graph(mod: tvm.IRModule, name: str, doc: str, what: str) -> Graph:
    try:
        mod = prepare(mod)
    except Exception as e:  # TVM's passes raise their own errors
        raise GraphError(f"{what}: TVM could not prepare the model: {first_line(e)}") from None
    try:
        return to_graph(mod, name, doc)
    except GraphError as e:
        raise GraphError(f"{what}: {e}") from None


########## Input shapes ##########

def _resolve(declared: Mapping[str, Sequence[int | str | None]], given: Shapes,
             what: str) -> dict[str, tuple[int, ...]]:
    """Static shapes for the model's inputs: ``declared`` (None or a name for a dynamic dim)
    completed and checked by ``given``."""
    if unknown := sorted(set(given) - set(declared)):
        raise GraphError(f"{what}: unknown input {unknown[0]!r}; the model's inputs: {', '.join(declared)}")
    out = {}
    for name, dims in declared.items():
        want = given.get(name)
        if want is not None:
            want = tuple(int(d) for d in want)
            if len(want) != len(dims):
                raise GraphError(f"{what}: input {name} has {len(dims)} dims, --input gives {len(want)}")
            for i, (d, w) in enumerate(zip(dims, want)):
                if isinstance(d, int) and d != w:
                    raise GraphError(f"{what}: input {name} dim {i} is {d} in the model, --input gives {w}")
            out[name] = want
            continue
        if dyn := [(i, d) for i, d in enumerate(dims) if not isinstance(d, int)]:
            i, d = dyn[0]
            example = ",".join(str(x) if isinstance(x, int) else "N" for x in dims)
            raise GraphError(f"{what}: input {name} has a dynamic dim {i}{f' ({d!r})' if d else ''}; give its "
                             f"shape with --input {name}={example}")
        out[name] = tuple(dims)
    return out


########## ONNX ##########

def _parse_onnx(data: bytes, what: str):
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise GraphError(f"{what} is not an ONNX model (it does not parse: {first_line(e)})") from None
    if not model.graph.node:
        raise GraphError(f"{what} is not an ONNX model (it has no graph nodes; truncated or another format?)")
    return model


def _onnx_model(data: bytes, extern: Mapping[str, bytes], what: str):
    """The parsed and checked model, its external data taken from the bytes that were hashed."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    model = _parse_onnx(data, what)
    for t in _get_all_tensors(model):
        if uses_external_data(t):
            info = {e.key: e.value for e in t.external_data}
            blob = extern[info["location"]]
            off = int(info.get("offset", 0))
            t.raw_data = blob[off:off + int(info["length"])] if "length" in info else blob[off:]
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
    try:
        onnx.checker.check_model(model)
    except Exception as e:
        raise GraphError(f"{what} is not a valid ONNX model: {first_line(e)}") from None
    return model


def _onnx_inputs(model: Any, what: str) -> dict[str, list]:
    import onnx

    inits = {i.name for i in model.graph.initializer}
    declared: dict[str, list] = {}
    for inp in model.graph.input:
        if inp.name in inits:  # older exporters list the weights as inputs too
            continue
        tt = inp.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type) if tt.elem_type else None
        if dtype != np.float32:
            raise GraphError(f"{what}: unsupported dtype {dtype or 'unknown'} of input {inp.name}: the workbench "
                             "computes in float32")
        declared[inp.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or None)
                              for d in tt.shape.dim]
    return declared


def _onnx_relax(model: Any, shapes: Mapping[str, tuple[int, ...]], what: str) -> tvm.IRModule:
    from tvm.relax.frontend.onnx import from_onnx

    try:
        return from_onnx(model, shape_dict={k: list(v) for k, v in shapes.items()},
                         dtype_dict={k: "float32" for k in shapes})
    except Exception as e:
        raise GraphError(f"{what}: TVM's ONNX importer refused it: {first_line(e)}") from None


########## torch.export ##########

def _pt2_program(data: bytes, what: str) -> Any:
    import torch

    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise GraphError(f"{what} is not a torch.export archive (a .pt2 file is a zip archive)")
    try:
        with _quiet():
            return torch.export.load(io.BytesIO(data))  # unpickles: local files only (module docstring)
    except Exception as e:
        raise GraphError(f"{what} is not a readable torch.export archive: {first_line(e)}") from None


def _exported_relax(ep: Any, what: str, shapes: Mapping[str, tuple[int, ...]]) -> tvm.IRModule:
    """The exported program in Relax; dynamic dims are fixed by re-exporting it at ``shapes``."""
    import torch

    declared = _ep_inputs(ep, what)
    if any(tuple(d) != tuple(shapes[n]) for n, d in declared.items()):
        args = tuple(torch.zeros(shapes[n]) for n in declared)
        try:
            with _quiet():
                ep = torch.export.export(ep.module(), args)
        except Exception as e:
            raise GraphError(f"{what}: cannot re-export it with input shapes {dict(shapes)}: {first_line(e)}") from None
    from tvm.relax.frontend.torch import from_exported_program

    try:
        with _quiet():
            return from_exported_program(ep, unwrap_unit_return_tuple=True)
    except Exception as e:
        raise GraphError(f"{what}: TVM's PyTorch importer refused it: {first_line(e)}") from None


def _ep_inputs(ep: Any, what: str) -> dict[str, list]:
    """The exported program's user inputs: name -> dims (an int, or None when dynamic)."""
    import torch

    out = {}
    user = set(ep.graph_signature.user_inputs)
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise GraphError(f"{what}: input {node.name} is not a tensor")
        if val.dtype != torch.float32:
            raise GraphError(f"{what}: unsupported dtype {str(val.dtype).removeprefix('torch.')} of input "
                             f"{node.name}: the workbench computes in float32")
        out[node.name] = [int(d) if isinstance(d, int) else str(d) for d in val.shape]
    return out


def export_factory(ref: str, inputs: Shapes | None = None):
    """``package.module:function`` called with no arguments: an ``nn.Module``, or ``(module,
    example_inputs)``; exported with ``torch.export`` at the ``inputs`` shapes (named after the
    forward's parameters) or the example inputs. Returns the ``ExportedProgram``."""
    import torch

    if not _FACTORY.match(ref):
        raise GraphError(f"{ref!r} is neither a model file nor a factory package.module:function")
    mod_name, fn_name = ref.split(":")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as e:
        raise GraphError(f"cannot find {ref}: {first_line(e)}") from None
    try:
        made = fn()
    except Exception as e:
        raise GraphError(f"{ref}() failed: {type(e).__name__}: {first_line(e)}") from None
    model, example = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    if not isinstance(model, torch.nn.Module):
        raise GraphError(f"{ref}() returned {type(model).__name__}, not a torch.nn.Module (or (module, inputs))")
    params = [p for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if inputs:
        names = [p.name for p in params]
        if sorted(inputs) != sorted(names):
            raise GraphError(f"{ref}: --input names {', '.join(inputs)} do not match the forward's inputs "
                             f"{', '.join(names)}")
        example = tuple(torch.zeros(tuple(inputs[n])) for n in names)
    if example is None:
        raise GraphError(f"{ref}: give the input shapes, e.g. --input {params[0].name if params else 'x'}=1,3,224,224")
    try:
        with _quiet():
            return torch.export.export(model.eval(), tuple(example))
    except Exception as e:
        raise GraphError(f"{ref}: torch.export failed: {first_line(e)}") from None


def import_module(model: Any, example_inputs: tuple, name: str, doc: str = "") -> Graph:
    """Import an in-memory ``nn.Module`` traced on ``example_inputs`` (the built-in networks)."""
    import torch

    try:
        with _quiet():
            ep = torch.export.export(model.eval(), tuple(example_inputs))
    except Exception as e:
        raise GraphError(f"{name}: torch.export failed: {first_line(e)}") from None
    return _graph(_exported_relax(ep, name, _resolve(_ep_inputs(ep, name), {}, name)), name, doc, name)
