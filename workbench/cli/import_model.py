"""``import``: a model file (ONNX, torch.export, expression ops) or a Python factory into a new session."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli.common import parse_target
from workbench.engine.base.errors import WorkbenchError


def register(sub: argparse._SubParsersAction) -> None:
    i = sub.add_parser("import", help="import an ONNX / torch.export model, expression ops (.expr) or a Python "
                                      "factory into a session",
                       description="Import MODEL (a .onnx or .pt2 file; a .expr file of expression ops, one "
                                   "`NAME: out[i, ...] = ...` or `input NAME[D1, ...]` per line; or package.module:"
                                   "function returning a torch.nn.Module, exported to OUT.pt2 beside the session) "
                                   "and write a session "
                                   "on it. The session pins the file by its SHA-256: replaying it after the file "
                                   "changed is refused. Exit status 2 when the model cannot be imported.")
    i.add_argument("model", help="a .onnx, .pt2 or .expr file, or package.module:function")
    i.add_argument("--out", metavar="SESSION.json", required=True, help="the session file to write")
    i.add_argument("--input", action="append", metavar="NAME=D1,D2,...",
                   help="an input's static shape, e.g. data=1,3,224,224 (needed for dynamic dims; repeatable)")
    i.add_argument("--name", help="session name (default: the model file's name)")
    i.add_argument("--target", metavar="JSON", help="a TVM target as JSON (default: this machine's)")
    i.add_argument("--backward", action="store_true",
                   help="with a .expr file: add the derived gradients; the graph also takes grad_<output> for each "
                        "output and returns grad_<input> for each input beside the forward outputs")
    i.set_defaults(fn=cmd_import)


def cmd_import(a: argparse.Namespace) -> int:
    """Import a model file (or export a factory's module to OUT.pt2 first) into a new session."""
    from workbench.engine.models import zoo
    from workbench.engine.models.frontend import FORMATS, export_factory, parse_input
    from workbench.engine.session.session import new_session, safe_path, save

    inputs = dict(parse_input(t) for t in a.input or [])
    if a.name:
        safe_path(".", a.name)  # refuse a name a session file cannot have
    out, model, origin = Path(a.out), a.model, None
    if a.backward:
        from workbench.engine.models.frontend.sources import backward_inputs

        inputs = backward_inputs(model, inputs)  # the session's inputs name the gradients: replay rebuilds them
    if Path(model).suffix.lower() not in FORMATS and not Path(model).exists():
        import torch

        origin, model = model, str(out.with_suffix(".pt2"))  # replay reads the file, never runs the factory
        program = export_factory(origin, inputs)
        out.parent.mkdir(parents=True, exist_ok=True)
        torch.export.save(program, model)
        inputs = {}
    try:
        spec, graph = zoo.file_model(model, inputs, origin)
    except WorkbenchError:
        if origin:
            Path(model).unlink(missing_ok=True)
        raise
    session = new_session(spec, a.name or None, parse_target(a.target))
    save(session, out)
    kinds: dict[str, int] = {}
    for n in graph.nodes:
        kinds[n.label] = kinds.get(n.label, 0) + 1
    print(f"imported {Path(model).name}: {len(graph.nodes)} ops ({', '.join(f'{k} {v}' for k, v in kinds.items())})")
    print(f"inputs: {', '.join(f'{t}={tuple(graph.tensors[t].shape)}' for t in graph.inputs)}; "
          f"outputs: {', '.join(f'{t}={tuple(graph.tensors[t].shape)}' for t in graph.outputs)}")
    print(f"session {session.name} written to {out}")
    return 0
