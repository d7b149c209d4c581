"""Loop primitives on a kernel's PrimFunc, through ``tvm.s_tir.Schedule``.

Blocks are addressed by name (an op's block has the op's name) and loops by ``(block, loop
variable)`` as printed in TVMScript: ``i0`` .. for a kernel's stored dims, ``i0_0, i0_1``
after a split, ``i0_i1_fused`` after a fuse. Replaying the same steps gives the same names.
Every primitive works on a copy; a refusal raises ``LoopError`` naming the primitive, its
arguments and TVM's reason, and leaves the input untouched.

>>> from tvm import te
>>> A = te.placeholder((64,), name="A")
>>> B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
>>> f = te.create_prim_func([A, B])
>>> [(l.name, l.extent) for l in list_loops(f, "B")]                  # before
[('i', 64)]
>>> sch = apply_step(f, LoopStep.make("split", block="B", loop="i", factors=[4, None]))
>>> [(l.name, l.extent) for l in list_loops(sch, "B")]                # after split
[('i_0', 4), ('i_1', 16)]
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Sequence

import tvm
from tvm import s_tir

from .errors import LoopError

__all__ = ["LoopStep", "LoopInfo", "PRIMITIVES", "list_blocks", "list_loops", "apply_step", "apply_steps",
           "script", "diff", "trace_json", "apply_trace_json", "basic_schedule"]

#: primitive -> (argument kinds, one-line doc); kinds drive the app's forms and validation
PRIMITIVES: dict[str, tuple[dict[str, str], str]] = {
    "split": ({"block": "block", "loop": "loop", "factors": "ints"}, "split a loop into nested loops (one factor may be null)"),
    "reorder": ({"block": "block", "loops": "loops"}, "reorder loops of a block (outermost first)"),
    "fuse": ({"block": "block", "loops": "loops"}, "fuse consecutive loops into one"),
    "vectorize": ({"block": "block", "loop": "loop"}, "vectorize a spatial loop"),
    "unroll": ({"block": "block", "loop": "loop"}, "unroll a loop"),
    "parallel": ({"block": "block", "loop": "loop"}, "run a loop's iterations on several cores"),
    "cache_read": ({"block": "block", "read_index": "int", "scope": "str"}, "read an input through a cache buffer"),
    "cache_write": ({"block": "block", "write_index": "int", "scope": "str"}, "write the output through a cache buffer"),
    "compute_at": ({"block": "block", "target_block": "block", "loop": "loop"}, "compute a producer inside a consumer's loop"),
    "reverse_compute_at": ({"block": "block", "target_block": "block", "loop": "loop"}, "compute a consumer inside a producer's loop"),
    "compute_inline": ({"block": "block"}, "inline a producer into its consumers"),
    "reverse_compute_inline": ({"block": "block"}, "inline a consumer into its producer"),
    "decompose_reduction": ({"block": "block", "loop": "loop"}, "separate a reduction's init above a loop"),
}
_DEFAULTS = {"scope": "global"}


@dataclass(frozen=True, slots=True)
class LoopStep:
    """One loop primitive with its arguments, hashable and JSON-able."""

    primitive: str
    args: tuple[tuple[str, Any], ...]

    @staticmethod
    def make(primitive: str, **args: Any) -> "LoopStep":
        freeze = lambda v: tuple(freeze(x) for x in v) if isinstance(v, (list, tuple)) else v  # noqa: E731
        return LoopStep(primitive, tuple((k, freeze(v)) for k, v in args.items()))

    @property
    def kwargs(self) -> dict[str, Any]:
        thaw = lambda v: [thaw(x) for x in v] if isinstance(v, tuple) else v  # noqa: E731
        return {k: thaw(v) for k, v in self.args}

    def to_json(self) -> dict:
        return {"primitive": self.primitive, "args": self.kwargs}

    @staticmethod
    def from_json(d: dict) -> "LoopStep":
        return LoopStep.make(d["primitive"], **d.get("args", {}))

    def __str__(self) -> str:
        return f"{self.primitive}({', '.join(f'{k}={v}' for k, v in self.kwargs.items())})"


@dataclass(frozen=True, slots=True)
class LoopInfo:
    block: str
    name: str
    extent: int
    kind: str  # serial | parallel | vectorized | unrolled | thread
    depth: int


def _sch(func_or_sch: Any) -> s_tir.Schedule:
    if isinstance(func_or_sch, s_tir.Schedule):
        return func_or_sch.copy()
    mod = func_or_sch if isinstance(func_or_sch, tvm.IRModule) else tvm.IRModule({"main": func_or_sch})
    return s_tir.Schedule(mod)


def list_blocks(func_or_sch: Any) -> list[str]:
    """Names of every block but the root, in program order."""
    sch = func_or_sch if isinstance(func_or_sch, s_tir.Schedule) else _sch(func_or_sch)
    names: list[str] = []

    def visit(parent: Any) -> None:
        for b in sch.get_child_blocks(parent):
            names.append(sch.get(b).name_hint)
            visit(b)

    visit(sch.get_sblock("root"))
    return names


def _kind(kind: Any) -> str:
    return {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled"}.get(int(kind), "thread")


def list_loops(func_or_sch: Any, block: str) -> list[LoopInfo]:
    """The loops around ``block``, outermost first, with extents and kinds."""
    sch = _sch(func_or_sch)
    b = _block(sch, block)
    out = []
    for d, lv in enumerate(sch.get_loops(b)):
        loop = sch.get(lv)
        out.append(LoopInfo(block, loop.loop_var.name, int(loop.extent), _kind(loop.kind), d))
    return out


def _block(sch: s_tir.Schedule, name: Any) -> Any:
    if not isinstance(name, str):
        raise LoopError(f"a block name must be a string, got {name!r}")
    if name not in list_blocks(sch):
        raise LoopError(f"unknown block {name!r}; blocks: {', '.join(list_blocks(sch))}")
    return sch.get_sblock(name)


def _loop(sch: s_tir.Schedule, block: str, name: Any) -> Any:
    lvs = sch.get_loops(_block(sch, block))
    names = [sch.get(lv).loop_var.name for lv in lvs]
    if name not in names:
        raise LoopError(f"block {block} has no loop {name!r}; its loops: {', '.join(names) or 'none'}")
    return lvs[names.index(name)]


def _int(v: Any, what: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise LoopError(f"{what} must be an integer, got {v!r}")
    return v


def _run(sch: s_tir.Schedule, step: LoopStep) -> None:
    spec = PRIMITIVES.get(step.primitive)
    if spec is None:
        raise LoopError(f"unknown loop primitive {step.primitive!r}; known: {', '.join(PRIMITIVES)}")
    a = {**{k: v for k, v in _DEFAULTS.items() if k in spec[0]}, **step.kwargs}
    missing, extra = set(spec[0]) - set(a), set(a) - set(spec[0])
    if missing or extra:
        raise LoopError(f"{step.primitive} takes {sorted(spec[0])}; "
                        + (f"missing {sorted(missing)}" if missing else f"unexpected {sorted(extra)}"))
    p, blk = step.primitive, a["block"]
    if p == "split":
        lv = _loop(sch, blk, a["loop"])
        fs = a["factors"]
        if not isinstance(fs, list) or len(fs) < 2 or sum(f is None for f in fs) > 1:
            raise LoopError(f"split factors must be a list of 2 or more, at most one null; got {fs!r}")
        extent = int(sch.get(lv).extent)
        known = math.prod(_int(f, "a split factor") for f in fs if f is not None)
        if any(f is not None and f <= 0 for f in fs):
            raise LoopError(f"split factors must be positive, got {fs}")
        if None not in fs and known != extent:
            raise LoopError(f"split factors {fs} multiply to {known} but loop {a['loop']} has extent {extent}")
        sch.split(lv, factors=fs)
    elif p in ("reorder", "fuse"):
        if not isinstance(a["loops"], list) or len(a["loops"]) < (2 if p == "fuse" else 1):
            raise LoopError(f"{p} needs a list of loops, got {a['loops']!r}")
        lvs = [_loop(sch, blk, n) for n in a["loops"]]
        sch.reorder(*lvs) if p == "reorder" else sch.fuse(*lvs)
    elif p in ("vectorize", "unroll", "parallel", "decompose_reduction"):
        lv = _loop(sch, blk, a["loop"])
        if p == "decompose_reduction":
            sch.decompose_reduction(_block(sch, blk), lv)
        else:
            getattr(sch, p)(lv)
    elif p in ("cache_read", "cache_write"):
        key = "read_index" if p == "cache_read" else "write_index"
        getattr(sch, p)(_block(sch, blk), _int(a[key], key), str(a["scope"]))
    elif p in ("compute_at", "reverse_compute_at"):
        b = _block(sch, blk)
        getattr(sch, p)(b, _loop(sch, a["target_block"], a["loop"]))
    else:
        getattr(sch, p)(_block(sch, blk))


def _reason(err: Exception) -> str:
    """TVM's reason in a line or two, without the C++ backtrace."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith(("File ", "at ", "#", "Stack trace", "0:", "1:"))
            and "ScheduleError: An error occurred" not in ln]
    for ln in keep:
        if "Error" in ln or "error" in ln:
            msg = ln.split("Error:", 1)[-1].strip()
            break
    else:
        msg = keep[-1] if keep else type(err).__name__
    return msg[:400]


def apply_step(func_or_sch: Any, step: LoopStep) -> s_tir.Schedule:
    """Apply one primitive to a copy of the schedule (or to a fresh schedule of a PrimFunc)."""
    sch = _sch(func_or_sch)
    try:
        _run(sch, step)
    except LoopError as e:
        raise LoopError(f"{step}: {e}") from None
    except Exception as e:  # TVM's ScheduleError, TVMError, ValueError...
        raise LoopError(f"{step} refused by TVM: {_reason(e)}") from None
    return sch


def apply_steps(func: Any, steps: Sequence[LoopStep]) -> s_tir.Schedule:
    """Apply several primitives in order; the error names the failing step's index."""
    sch = _sch(func)
    for i, step in enumerate(steps):
        try:
            sch = apply_step(sch, step)
        except LoopError as e:
            raise LoopError(f"loop step {i}: {e}") from None
    return sch


def script(func_or_sch: Any) -> str:
    """The (scheduled) function as TVMScript."""
    if isinstance(func_or_sch, s_tir.Schedule):
        return func_or_sch.mod["main"].script()
    return func_or_sch.script()


def diff(before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), "before", "after"))


def trace_json(sch: s_tir.Schedule) -> Any:
    """The schedule's trace as JSON (what MetaSchedule tuning records hold)."""
    return sch.trace.as_json()


def apply_trace_json(func: Any, trace: Any) -> s_tir.Schedule:
    """Rebuild a schedule of ``func`` from a saved trace."""
    sch = _sch(func)
    try:
        s_tir.schedule.Trace.apply_json_to_schedule(trace, sch)
    except Exception as e:
        raise LoopError(f"the saved trace does not apply to this kernel: {_reason(e)}") from None
    return sch


def basic_schedule(func: Any, head: str | None = None) -> list[LoopStep]:
    """A sensible starting schedule, as a list of steps the user can edit: the head block's
    reductions move outside its innermost spatial loop, which is vectorized (split by 16 when
    long), its outermost non-unit spatial loop runs in parallel, and the element-wise blocks
    after it are inlined or computed inside that parallel loop."""
    sch = _sch(func)
    blocks = list_blocks(sch)
    head = head or blocks[0]
    steps: list[LoopStep] = []

    def attempt(step: LoopStep) -> bool:
        nonlocal sch
        try:
            sch = apply_step(sch, step)
        except LoopError:
            return False
        steps.append(step)
        return True

    loops = list_loops(sch, head)
    # lowering names spatial loops i0, i1, ... and reduction loops r* (ops.py)
    spatial = [l.name for l in loops if not l.name.startswith("r")]
    reduce = [l.name for l in loops if l.name.startswith("r")]
    if spatial:
        inner = spatial[-1]
        ext = next(l.extent for l in loops if l.name == inner)
        if ext > 64 and ext % 16 == 0 and attempt(LoopStep.make("split", block=head, loop=inner, factors=[None, 16])):
            spatial = spatial[:-1] + [f"{inner}_0"]
            inner = f"{inner}_1"
        if reduce:
            attempt(LoopStep.make("reorder", block=head, loops=spatial + reduce + [inner]))
        attempt(LoopStep.make("vectorize", block=head, loop=inner))
    outer = next((l.name for l in list_loops(sch, head) if l.extent > 1 and not l.name.startswith("r")), None)
    if outer:
        attempt(LoopStep.make("parallel", block=head, loop=outer))
    for b in reversed(blocks[1:]):
        if not attempt(LoopStep.make("reverse_compute_inline", block=b)) and outer:
            attempt(LoopStep.make("reverse_compute_at", block=b, target_block=head, loop=outer))
    return steps
