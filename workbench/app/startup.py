"""The engine's import in the app's server: TVM first, with PyTorch hidden.

``tvm_ffi`` and ``tvm.relax`` import PyTorch when it is installed, only to exchange tensors with
it faster by DLPack; that is nearly half of the engine's import (over a second on 2 cores), and
the first page a tab opens does not use PyTorch. So the server imports TVM while ``import torch``
fails, and PyTorch loads when a page first needs it (model import, network timing: lazily, as
the engine always imports it). Tensors still cross by DLPack, by the standard protocol.
"""

from __future__ import annotations

import sys
import threading

from workbench.app import first_view

__all__ = ["import_engine"]


#: the warm-up thread and a first tab's run may both import: one hides PyTorch, the other waits
_HIDING = threading.Lock()


def import_engine() -> None:
    """Import TVM (PyTorch hidden, unless already loaded) and the app's engine-side state; set
    ``first_view.ENGINE_READY``."""
    with _HIDING:
        if "tvm" not in sys.modules and "torch" not in sys.modules:
            sys.modules["torch"] = None  # type: ignore[assignment] - makes `import torch` fail at once
            try:
                import tvm  # noqa: F401
            finally:
                if "torch" in sys.modules and sys.modules["torch"] is None:
                    del sys.modules["torch"]
    import workbench.app.state  # noqa: F401 - the engine, as the pages use it

    first_view.ENGINE_READY.set()
