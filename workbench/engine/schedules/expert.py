"""Expert schedules: analytic loop steps that start a kernel from a known-good structure
(NeoCPU / oneDNN direct conv, BLIS GEMM micro-kernel), with sizes from the target.

``expert_steps(func, kernel, target)`` returns the steps as ordinary ``loop`` steps, so they are
visible, editable, replayable and exportable like a hand schedule.
"""

from __future__ import annotations

from typing import Mapping

from tvm import tirx

from ..measure.ceilings import cache_info
from ..base.errors import LoopError
from ..base.step import Step
from ..build.targets import target_cores, vector_unit
from .tiling.steps import main_block, tile_steps

__all__ = ["expert_steps"]

#: L1 data cache assumed when the machine's cannot be read (bytes)
_L1_DEFAULT = 32 * 1024


def expert_steps(func: tirx.PrimFunc, kernel: str, target: Mapping) -> list[Step]:
    """The expert schedule of an unscheduled kernel for ``target``, as loop steps.

    The register-blocked template of ``tiling``, for a kernel with a complex op (a block with a
    reduction); which kernels take it is ``policy``'s choice (``policy.analytic_steps``).

    Parameters
    ----------
    func : tvm.tirx.PrimFunc
        The kernel as lowered (``program.funcs[kernel]``), not yet scheduled.
    kernel : str
        The kernel's name: the steps' target.
    target : Mapping
        The session's target (lanes and registers come from its CPU).

    Returns
    -------
    list of Step
        Loop steps that ``loops.apply.apply_steps(func, steps)`` applies.

    Raises
    ------
    LoopError
        When the kernel has no complex op.

    Examples
    --------
    >>> from workbench.engine.schedules.tiling.steps import _example
    >>> steps = expert_steps(_example()[0], "mm", {"kind": "llvm", "mcpu": "haswell"})
    >>> print(steps[0]); print(steps[-1])
    split(block='C', loop='j', factors=[None, 2, 8])
    decompose_reduction(block='C', loop='k')
    """
    if main_block(func) is None:
        raise LoopError(f"kernel {kernel!r} has no complex op (no block with a reduction): expert schedules "
                        "cover convolutions and matmuls")
    l1 = cache_info()[0].get("L1d", _L1_DEFAULT)
    return tile_steps(func, kernel, vector_unit(target), l1, target_cores(target))
