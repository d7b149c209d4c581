"""What the paired studies in ``benchmarks/results`` share: the conversion schedules of an older
commit, imported beside the working tree's, and the target from the command line.

Run a study from the repository root (``PYTHONPATH=. python benchmarks/results/<study>/<script>``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType


def old_convert(rev: str = "HEAD") -> ModuleType:
    """``workbench.engine.expert.convert`` as it was at ``rev`` (git), as a module of its own."""
    source = subprocess.check_output(["git", "show", f"{rev}:workbench/engine/expert/convert.py"], text=True)
    path = Path(tempfile.mkdtemp()) / "convert_old.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("workbench.engine.expert.convert_old", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def target_and_args(argv: list[str]) -> tuple[dict, list[str]]:
    """The study's target (the host's CPU, 2 cores; ``--mcpu X`` builds for X) and the other arguments."""
    args, target = list(argv), {"kind": "llvm", "num-cores": 2}
    if "--mcpu" in args:
        i = args.index("--mcpu")
        target["mcpu"] = args[i + 1]
        del args[i:i + 2]
    return target, args
