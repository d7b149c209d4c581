"""What a process needs before its first tuning, applied explicitly: by the worker's ``main``,
by ``loop.tune_loops``, and as the initializer of TVM's worker pools. Importing this module (or
any other of the engine) changes nothing global.

- ``import_tensor_intrinsics``: MetaSchedule imports ``tvm.s_tir.tensor_intrin`` on first use
  (``TuneContext``, ``default_build``), which parses ~500 TVMScript intrinsics, each calling
  ``inspect.stack()``, which reads every frame's source (tens of seconds a process); a
  ``light_stack`` swapped in while the import runs avoids that.
- ``children_import_workbench``: TVM's worker processes unpickle our initializer and RPC session
  function by reference, so they must be able to ``import workbench`` wherever they start.
"""

from __future__ import annotations

import inspect
import linecache
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["REPO_ROOT", "light_stack", "import_tensor_intrinsics", "workbench_pythonpath",
           "children_import_workbench"]

#: the folder that holds the ``workbench`` package
REPO_ROOT = Path(__file__).resolve().parents[3]

_TENSOR_INTRIN = "tvm.s_tir.tensor_intrin"
_SWAP = threading.Lock()  # inspect.stack is process-wide: one swap at a time, so each restores the real one


def _light_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack`` without the per-frame source lookups (only the frames TVMScript reads)."""
    frame, out, depth = sys._getframe(1), [], 0
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno) if depth < 4 and context > 0 else ""
        out.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                     [line] if line else None, 0 if line else None, positions=None))
        frame, depth = frame.f_back, depth + 1
    return out


@contextmanager
def light_stack() -> Iterator[None]:
    """Swap ``inspect.stack`` for a light version while the block runs, then restore it.

    Process-wide while it lasts (other threads see the light version too), so keep the block short.

    >>> real = inspect.stack
    >>> with light_stack():
    ...     inspect.stack is real
    False
    >>> inspect.stack is real
    True
    """
    with _SWAP:
        real = inspect.stack
        inspect.stack = _light_stack
        try:
            yield
        finally:
            inspect.stack = real


def import_tensor_intrinsics() -> None:
    """Import TVM's tensor intrinsics under ``light_stack`` (once per process; later calls return
    at once). Also the initializer of TVM's build and run worker pools: ``LocalBuilder`` imports
    them in every build worker, inside the build timeout, and restarts its workers every batch;
    there it also registers our build function and TIR pipeline (``codegen``)."""
    from ..build import codegen  # noqa: F401 - registers codegen.BUILD_CANDIDATE and codegen.PIPELINE

    if _TENSOR_INTRIN in sys.modules:
        return
    with light_stack():
        import tvm.s_tir.tensor_intrin  # noqa: F401


def workbench_pythonpath(current: str | None) -> str:
    """``current`` (a ``PYTHONPATH`` value, or None) with ``REPO_ROOT`` first, unless it is there.

    >>> workbench_pythonpath(str(REPO_ROOT) + os.pathsep + "/x") == str(REPO_ROOT) + os.pathsep + "/x"
    True
    >>> workbench_pythonpath("/x") == os.pathsep.join([str(REPO_ROOT), "/x"])
    True
    """
    paths = [p for p in (current or "").split(os.pathsep) if p]
    return os.pathsep.join(paths if str(REPO_ROOT) in paths else [str(REPO_ROOT), *paths])


@contextmanager
def children_import_workbench() -> Iterator[None]:
    """``PYTHONPATH`` holds ``REPO_ROOT`` while the block runs (for the worker processes TVM starts
    in it), and is restored afterwards."""
    old = os.environ.get("PYTHONPATH")
    new = workbench_pythonpath(old)
    if new == old:
        yield
        return
    os.environ["PYTHONPATH"] = new
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
