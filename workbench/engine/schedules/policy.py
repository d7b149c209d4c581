"""The schedule policy: which schedule each kernel gets, decided here and nowhere else.

``choose(prog, kernel, target, ...)`` gives a kernel the first of, in this order:

1. its own schedule: the session's hand loop steps (after the tuned trace they edit, if any), or
   its applied tuning record (``tuned``: a trace);
2. a ``Pin``: what 3-5 gave it when the session was saved, while the kernel and the target are
   the very ones the pin was made for, so a replay after a heuristic change builds the same kernels;
3. ``expert``, where the caller asks for it: ``expert_schedule`` (``analytic_steps``);
4. ``conversion``, for a stand-alone layout conversion: its analytic schedule (``conversion``);
5. ``default``: none, TVM's default schedule.

``KernelSchedule.apply`` builds a schedule on its unscheduled kernel; ``in_order`` orders
fallbacks (a tuning result that is wrong) by the same order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Iterator, Mapping

import tvm_ffi
from tvm import s_tir, tirx

from ..base.errors import SessionError, WorkbenchError
from .attention import attention_steps, is_attention
from .expert import expert_steps
from .conversion.steps import conversion_steps
from .simple import rows_steps, window_steps
from .tiling.steps import main_block
from ..loops.primitives import apply_steps, apply_trace_json, empty_schedule, list_blocks, list_loops
from ..base.step import Step

if TYPE_CHECKING:
    from ..build.program import Program

__all__ = ["KINDS", "PINNED", "KernelSchedule", "DEFAULT", "Pin", "choose", "expert_schedule", "analytic_steps",
           "scheduled_funcs", "fingerprint", "in_order"]

#: a schedule's kinds, in the policy's order
KINDS = ("loop steps", "tuned", "expert", "conversion", "default")
#: the kinds the policy itself gives (the others are the session's own), which a pin records
PINNED = ("expert", "conversion", "default")


@dataclass(frozen=True)
class KernelSchedule:
    """A kernel's schedule: its ``kind`` (one of ``KINDS``), loop ``steps`` and a tuned ``trace``
    (``loop steps`` may edit a trace: they apply after it)."""

    kind: str
    steps: tuple[Step, ...] = ()
    trace: Any = None

    def apply(self, func: tirx.PrimFunc) -> s_tir.Schedule:
        """A new ``tvm.s_tir.Schedule`` of the unscheduled ``func`` after this schedule."""
        if self.kind == "tuned":
            return apply_trace_json(func, self.trace)
        if self.kind == "default":
            return empty_schedule(func)
        return apply_steps(func if self.trace is None else apply_trace_json(func, self.trace), self.steps)


DEFAULT = KernelSchedule("default")


def fingerprint(func: tirx.PrimFunc, target: Mapping) -> str:
    """The unscheduled kernel's structural hash (stable across processes) and the target, hashed
    to 16 hex digits: what a pin holds for."""
    key = f"{tvm_ffi.structural_hash(func) & (2**64 - 1):016x} {json.dumps(dict(target), sort_keys=True)}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Pin:
    """The schedule the policy gave kernel ``kernel`` when its session was saved, for the
    unscheduled kernel and target whose ``fingerprint`` is ``of``. Its session-file form:

    >>> pin = Pin("convert_x", "00ff00ff00ff00ff", KernelSchedule("conversion", (
    ...     Step.make("loop", "convert_x", "parallel", block="convert_x", loop="i0"),)))
    >>> d = pin.to_json()
    >>> d["op"], d["kernel_hash"], d["schedule"]
    ('convert_x', '00ff00ff00ff00ff', 'conversion')
    >>> d["steps"]
    [{'primitive': 'parallel', 'args': {'block': 'convert_x', 'loop': 'i0'}}]
    >>> Pin.from_json(pin.to_json()) == pin
    True
    """

    kernel: str
    of: str
    schedule: KernelSchedule

    def to_json(self) -> dict:
        out: dict[str, Any] = {"op": self.kernel, "kernel_hash": self.of, "schedule": self.schedule.kind}
        if self.schedule.kind != "default":
            out["steps"] = [{"primitive": s.primitive, "args": s.kwargs} for s in self.schedule.steps]
        return out

    @staticmethod
    def from_json(d: Any, index: int = 0) -> Pin:
        """Parse one entry of a session's ``pinned`` list; errors name the entry and field."""
        where = f'field "pinned": entry {index}'
        if not isinstance(d, dict):
            raise SessionError(f"{where}: must be an object, got {type(d).__name__}")
        if extra := sorted(set(d) - {"op", "kernel_hash", "schedule", "steps"}):
            raise SessionError(f'{where}: unknown field "{extra[0]}"')
        for f in ("op", "kernel_hash", "schedule"):
            if not isinstance(d.get(f), str):
                raise SessionError(f'{where}: field "{f}" must be a string, got {type(d.get(f)).__name__}')
        if d["schedule"] not in PINNED:
            raise SessionError(f'{where}: field "schedule" must be one of {list(PINNED)}, got {d["schedule"]!r}')
        steps = d.get("steps", [])
        if not isinstance(steps, list) or (steps and d["schedule"] == "default"):
            raise SessionError(f'{where}: field "steps" must be a list (none for a default schedule)')
        try:
            parsed = tuple(Step.from_json({"kind": "loop", "op": d["op"], **s} if isinstance(s, dict) else s, i)
                           for i, s in enumerate(steps))
        except SessionError as e:
            raise SessionError(f"{where}: {str(e).replace('action', 'step', 1)}") from None
        return Pin(d["op"], d["kernel_hash"], KernelSchedule(d["schedule"], parsed))


def analytic_steps(func: tirx.PrimFunc, kernel: str, target: Mapping, complex_op: bool | None = None) -> list[Step]:
    """The expert schedule of an unscheduled kernel, as loop steps: ``expert.expert_steps`` (the
    register-blocked template) for a kernel with a complex op, ``attention.attention_steps``
    for the attention kernel alone (blocked by query rows), else ``simple``'s analytic
    schedules: ``rows_steps`` for several blocks (softmax, layer norm), ``window_steps`` for one
    block that reduces a window (pooling), ``conversion.steps.conversion_steps`` for a copy or an
    element-wise op. ``complex_op``: whether the kernel holds a complex op (None: whether it has
    a block with a reduction). Raises ``LoopError`` when no template fits.
    """
    if is_attention(func):  # its stages reduce, yet the conv/GEMM template does not fit them
        return attention_steps(func, kernel, target)
    if complex_op is None:
        complex_op = main_block(func) is not None
    if complex_op:
        return expert_steps(func, kernel, target)
    blocks = list_blocks(func)
    if len(blocks) > 1:
        return rows_steps(func, kernel, target)
    if len(blocks) == 1 and any(lp.reduction for lp in list_loops(func, blocks[0])):
        return window_steps(func, kernel, target)
    return conversion_steps(func, kernel, target)


def expert_schedule(prog: Program, kernel: str, target: Mapping) -> KernelSchedule:
    """Kernel ``kernel`` of ``prog`` on its expert schedule (``analytic_steps``, told whether it
    holds a complex op). Raises ``LoopError`` when no template fits."""
    k = next(k for k in prog.plan.kernels if k.name == kernel)
    complex_op = bool(k.ops) and prog.graph.node(k.head).kind == "complex"
    return KernelSchedule("expert", tuple(analytic_steps(prog.funcs[kernel], kernel, target, complex_op)))


def choose(prog: Program, kernel: str, target: Mapping, *, own: KernelSchedule | None = None,
           pinned: Pin | None = None, expert: bool = False) -> KernelSchedule:
    """The schedule of kernel ``kernel`` of ``prog`` (its unscheduled program), by the policy's
    order (the module docstring): ``own``, the session's schedule of it; ``pinned``, its pin;
    ``expert``, whether an expert schedule is wanted when neither is given.

    Raises ``LoopError`` when a stand-alone conversion gets no analytic schedule."""
    if own is not None:
        return own
    func = prog.funcs[kernel]
    if pinned is not None and pinned.kernel == kernel and pinned.of == fingerprint(func, target):
        return pinned.schedule
    if expert:
        try:
            return expert_schedule(prog, kernel, target)
        except WorkbenchError:  # no template fits: the next in order
            pass
    if next(k for k in prog.plan.kernels if k.name == kernel).conversion is not None:
        return KernelSchedule("conversion", tuple(conversion_steps(func, kernel, target)))
    return DEFAULT


def scheduled_funcs(prog: Program, target: Mapping, *, own: Mapping[str, KernelSchedule] | None = None,
                    expert: Collection[str] = ()) -> dict[str, tirx.PrimFunc]:
    """Every kernel of ``prog`` that ``choose`` schedules (``own``: schedules by kernel; ``expert``:
    the kernels that want one), after its schedule; kernels on TVM's default are left out."""
    own = own or {}
    out = {}
    for k in prog.plan.kernels:
        sched = choose(prog, k.name, target, own=own.get(k.name), expert=k.name in expert)
        if sched.kind != "default":
            out[k.name] = sched.apply(prog.funcs[k.name]).mod["main"]
    return out


def in_order(tries: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``tries`` (kind -> anything: a way to reach that schedule) in the policy's order.

    >>> [kind for kind, _ in in_order({"default": 0, "expert": 1, "tuned": 2})]
    ['tuned', 'expert', 'default']
    """
    if unknown := sorted(set(tries) - set(KINDS)):
        raise ValueError(f"unknown schedule kind {unknown[0]!r}; the policy's kinds: {', '.join(KINDS)}")
    return ((kind, tries[kind]) for kind in KINDS if kind in tries)
