"""Applying loop steps: each step checked (``checks``), then done by the ``tvm.s_tir.Schedule``
method of the same name, on a copy; a refusal, ours or TVM's, is a ``LoopError`` naming the
step and the reason.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from tvm import s_tir

from ..base.errors import LoopError
from ..base.step import Step
from .checks import validate
from .nest import FuncOrSchedule, new_schedule
from .specs import PRIMITIVES, loop_arg

__all__ = ["apply_step", "apply_steps", "tvm_reason"]


def _index_map(factors: Sequence[int], perm: Sequence[int]) -> Callable[..., tuple]:
    """transform_layout's index map: each dim split by its factor (outer, inner), then permuted."""
    def index_map(*idx: Any) -> tuple:
        dims = [part for i, f in zip(idx, factors) for part in ((i // f, i % f) if f > 1 else (i,))]
        return tuple(dims[p] for p in perm)
    return index_map


_RV = re.compile(r"(?:(?:[Bb]lock|[Ll]oop) )?(s_tir\.(SBlock|For)#\d+)")
_RV_LINE = re.compile(r"# (s_tir\.(?:SBlock|For)#\d+)\s*\n\s*(?:with T\.sblock\(\"([^\"]+)\"|for (\w+))")


def tvm_reason(err: Exception) -> str:
    """TVM's reason in a line or three: the rendered IR and backtrace dropped, ``s_tir.SBlock#0``
    replaced by the block's name."""
    text = str(err)
    ir, sep, msg = text.partition("Error message:")
    refs = {m[1]: f"block {m[2]!r}" if m[2] else f"loop {m[3]!r}" for m in _RV_LINE.finditer(ir)}
    lines = [ln.strip() for ln in (msg if sep else text).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("File ", "Traceback", "Stack trace", "at ", "^"))]
    lines = [re.sub(r"^(\w+\.)*\w*Error: ", "", ln) for ln in lines[:3]]
    out = _RV.sub(lambda m: refs.get(m[1], "a " + ("block" if m[2] == "SBlock" else "loop")), " ".join(lines))
    return (out[:400] + "...") if len(out) > 400 else out or type(err).__name__


def _apply(sch: s_tir.Schedule, step: Step) -> None:
    """Apply ``step`` to ``sch`` in place."""
    if not isinstance(step, Step) or step.kind != "loop":
        raise LoopError(f"expected a loop Step, got {step!r}")
    try:
        a, loops = validate(sch, step)
    except LoopError as e:
        raise LoopError(f"{step}: {e}") from None
    spec = PRIMITIVES[step.primitive]
    try:
        # the handles: their GetSBlock / GetLoops enter the trace, as in MetaSchedule's traces
        h = {k: sch.get_sblock(a[k]) if kind == "block" else a[k] for k, kind in spec.args.items()}
        if key := loop_arg(spec):
            rvs = sch.get_loops(h[spec.loop_of])
            h[key] = [rvs[lp.depth] for lp in loops] if spec.args[key] == "loops" else rvs[loops[0].depth]
        if step.primitive == "transform_layout":  # TVM takes the buffer as ("write", i) and an index map
            sch.transform_layout(h["block"], ("write", a["write_index"]), _index_map(a["factors"], a["perm"]))
        else:
            getattr(sch, step.primitive)(*[x for k in spec.tvm_args for x in (h[k[1:]] if k[0] == "*" else [h[k]])])
    except Exception as e:  # noqa: BLE001 - ScheduleError, TVMError, InternalError, ValueError from the FFI...
        raise LoopError(f"{step}: TVM refused: {tvm_reason(e)}") from None


def apply_step(func_or_sch: FuncOrSchedule, step: Step) -> s_tir.Schedule:
    """Apply one loop primitive to a copy of the schedule (or to a new schedule of a function).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
        Left unchanged.
    step : Step
        A loop step (``loop_step``): a primitive of ``PRIMITIVES`` with its arguments.

    Returns
    -------
    tvm.s_tir.Schedule
        A new schedule whose trace ends with the step.

    Raises
    ------
    LoopError
        An unknown primitive, block or loop, arguments of the wrong type or value, or a refusal
        by TVM; the message names the step and the reason.

    Examples
    --------
    ``split`` requires a loop of the block; factors, outermost first, that multiply to the
    loop's extent, or with one null factor, inferred. Before split, in TensorIR:

    >>> from tvm import te
    >>> from workbench.engine.loops.nest import list_loops, script
    >>> from workbench.engine.loops.specs import loop_step
    >>> A = te.placeholder((64,), name="A")
    >>> B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    >>> func = te.create_prim_func([A, B])
    >>> print(script(func))
    # from tvm.script import tirx as T
    # from tvm.tirx.layout import Axis
    <BLANKLINE>
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        for i in range(64):
            with T.sblock("B"):
                v_i = T.axis.spatial(64, i)
                T.reads(A[v_i])
                T.writes(B[v_i])
                B[v_i] = A[v_i] * T.float32(2.0)

    After applying split, the IR becomes:

    >>> sch = apply_step(func, loop_step("split", block="B", loop="i", factors=[None, 16]))
    >>> print(script(sch))
    # from tvm.script import tirx as T
    # from tvm.tirx.layout import Axis
    <BLANKLINE>
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        for i_0, i_1 in T.grid(4, 16):
            with T.sblock("B"):
                v_i = T.axis.spatial(64, i_0 * 16 + i_1)
                T.reads(A[v_i])
                T.writes(B[v_i])
                B[v_i] = A[v_i] * T.float32(2.0)
    >>> [(loop.name, loop.extent) for loop in list_loops(sch, "B")]
    [('i_0', 4), ('i_1', 16)]
    >>> apply_step(func, loop_step("split", block="B", loop="i", factors=[3, 16]))
    Traceback (most recent call last):
    ...
    workbench.engine.base.errors.LoopError: split(block='B', loop='i', factors=[3, 16]): split factors [3, 16] multiply to 48 but loop 'i' has extent 64
    """
    sch = new_schedule(func_or_sch)
    _apply(sch, step)
    return sch


def apply_steps(func_or_sch: FuncOrSchedule, steps: Sequence[Step]) -> s_tir.Schedule:
    """Apply steps in order to a new schedule of ``func_or_sch`` (left unchanged).

    Parameters
    ----------
    func_or_sch : PrimFunc, IRModule or Schedule
    steps : sequence of Step

    Returns
    -------
    tvm.s_tir.Schedule

    Raises
    ------
    LoopError
        As ``apply_step``, the message starting with the failing step's index: ``step 2: ...``.
    """
    sch = new_schedule(func_or_sch)
    for i, step in enumerate(steps):
        try:
            _apply(sch, step)
        except LoopError as e:
            raise LoopError(f"step {i}: {e}", reason=e.reason) from None
    return sch
