"""The x86 assembly LLVM emits for a kernel, and what a performance engineer counts in it: vector
and scalar FMAs, stack spills and reloads, the widest vector register, and the innermost loops
(the hottest: the one with the most FMAs).

LLVM prints AT&T syntax and marks its register-allocator's stack traffic with comments
(``# 32-byte Spill``, ``# 32-byte Reload``, ``# 4-byte Folded Reload``): those are counted, not
guessed from addressing modes. A loop is a label with a jump back to it from below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from . import codegen
from ..base.errors import BuildError
from ..base.words import plural

__all__ = ["kernel_asm", "innermost_loop_spans", "innermost_loops", "stack_accesses", "AsmSummary", "summarize_asm"]

_LABEL = re.compile(r"^(\.?L\w+):")
_JUMP = re.compile(r"^\s+j\w+\s+(\.?L\w+)\s*(#.*)?$")
_FMA = re.compile(r"^\s*v?fn?m(?:add|sub)\d*([ps])[sd]\b")
_SCALAR_MATH = re.compile(r"^\s*v?(?:add|sub|mul|div|max|min|sqrt)s[sd]\b")
_VECTOR_MUL = re.compile(r"^\s*v?mulp[sd]\b")


def kernel_asm(func: Any, target: Mapping, name: str = "kernel") -> str:
    """Build one PrimFunc for ``target`` and return its assembly (the kernel, its parallel
    bodies and TVM's wrapper). Raises ``BuildError`` naming the kernel when it does not build."""
    import tvm

    mod = tvm.IRModule({name: func.with_attr("global_symbol", name)})
    try:
        return codegen.compile(mod, target).mod.inspect_source("asm")
    except BuildError:
        raise
    except Exception as e:  # noqa: BLE001 - TVM's build errors come in several types
        raise BuildError(f"kernel {name} failed to build: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def _instruction(line: str) -> str | None:
    text = line.split("#", 1)[0].strip()
    return text if text and not text.startswith(".") and not text.endswith(":") else None


def innermost_loop_spans(asm: str) -> list[tuple[int, int]]:
    """The line spans (0-based, label line to the jump back, inclusive) of each innermost loop:
    a label with a jump back to it from below, and no such loop inside."""
    lines = asm.splitlines()
    where = {m.group(1): i for i, ln in enumerate(lines) if (m := _LABEL.match(ln))}
    loops = [(where[m.group(1)], j) for j, ln in enumerate(lines)
             if (m := _JUMP.match(ln)) and where.get(m.group(1), j + 1) < j]
    return [(a, b) for a, b in loops if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)]


def innermost_loops(asm: str) -> list[list[str]]:
    """The instructions of each innermost loop (see ``innermost_loop_spans``)."""
    lines = asm.splitlines()
    return [[ln.strip() for ln in lines[a + 1:b + 1] if ln.strip() and not ln.strip().startswith((".", "#"))]
            for a, b in innermost_loop_spans(asm)]


def stack_accesses(instructions: list[str]) -> list[str]:
    """The instructions that load or store through the stack (a spill, in a hot loop)."""
    return [i for i in instructions if "(%rsp)" in i or "(%rbp)" in i or "(%esp)" in i]


@dataclass(frozen=True)
class AsmSummary:
    """Counts over a kernel's assembly; ``hot`` is the span (0-based lines, inclusive) of the
    innermost loop with the most FMAs (None when no loop has one)."""

    instructions: int
    vector_fma: int
    scalar_fma: int
    scalar_math: int
    spills: int
    reloads: int
    vector_bits: int
    hot: tuple[int, int] | None
    hot_instructions: int
    hot_vector_fma: int
    hot_stack: int
    hot_vector_mul: int
    hot_spills: int = 0  # of ``hot_stack``: the register allocator's (LLVM's Spill / Reload comments)

    def notes(self) -> list[str]:
        """What the counts mean for speed, most important first.

        >>> summarize_asm("L1:\\n  vfmadd231ps %ymm0, %ymm1, %ymm2\\n  jne L1\\n").notes()
        ['hot loop: 1 vector FMA in 2 instructions, 256-bit registers, no stack traffic']
        """
        out = []
        if self.hot is None:
            out.append("no loop with an FMA: the multiply-adds are not fused (or not in a loop)")
        else:
            # the rest of the stack traffic is arrays TVM allocated on the stack (a local tile), not spills
            stack = ", ".join(part for part in (
                plural(self.hot_spills, "spill or reload", "spills and reloads") if self.hot_spills else "",
                plural(self.hot_stack - self.hot_spills, "access", "accesses") + " to arrays on the stack (not spills)"
                if self.hot_stack > self.hot_spills else "") if part) or "no stack traffic"
            out.append(f"hot loop: {plural(self.hot_vector_fma, 'vector FMA')} in {self.hot_instructions} instructions, "
                       f"{self.vector_bits}-bit registers, {stack}")
            if self.hot_vector_fma == 0:
                out.append("the hot loop's FMAs are scalar: the innermost loop is not vectorized")
            if self.hot_vector_mul:
                out.append(f"{plural(self.hot_vector_mul, 'vector multiply', 'vector multiplies')} not fused into "
                           "an FMA in the hot loop")
        if self.scalar_fma + self.scalar_math > self.vector_fma:
            out.append(f"{self.scalar_fma + self.scalar_math} scalar float instructions outnumber the vector FMAs "
                       f"({self.vector_fma}): look for a remainder or an unvectorized loop")
        return out


def summarize_asm(asm: str) -> AsmSummary:
    """Count FMAs, scalar float math, spills and reloads in ``asm``, and find the hot loop.

    >>> s = summarize_asm('''
    ... .LBB0_2:                                # =>This Inner Loop Header: Depth=1
    ...     vbroadcastss    (%rax), %zmm1
    ...     vfmadd231ps     %zmm1, %zmm2, %zmm0
    ...     vfmadd231ps     64(%rcx), %zmm1, %zmm3
    ...     vmovups %zmm4, 128(%rsp)            # 64-byte Spill
    ...     jne     .LBB0_2
    ...     vaddss  %xmm0, %xmm1, %xmm1
    ... ''')
    >>> s.vector_fma, s.scalar_math, s.spills, s.vector_bits, s.hot, s.hot_stack
    (2, 1, 1, 512, (1, 6), 1)
    """
    lines = asm.splitlines()
    instr = [(i, t) for i, ln in enumerate(lines) if (t := _instruction(ln))]
    fma = {i: m.group(1) for i, t in instr if (m := _FMA.match(t))}
    spans = innermost_loop_spans(asm)
    counts = [(sum(1 for i in fma if a <= i <= b), (a, b)) for a, b in spans]
    n_fma, hot = max(counts, default=(0, None))
    inside = [(i, t) for i, t in instr if hot and hot[0] <= i <= hot[1]]
    bits = next((b for reg, b in (("%zmm", 512), ("%ymm", 256), ("%xmm", 128)) if reg in asm), 0)
    return AsmSummary(
        instructions=len(instr), vector_fma=sum(1 for k in fma.values() if k == "p"),
        scalar_fma=sum(1 for k in fma.values() if k == "s"),
        scalar_math=sum(1 for _, t in instr if _SCALAR_MATH.match(t)),
        spills=sum(1 for ln in lines if ln.rstrip().endswith("Spill")),
        reloads=sum(1 for ln in lines if ln.rstrip().endswith("Reload")),
        vector_bits=bits, hot=hot if n_fma else None, hot_instructions=len(inside) if n_fma else 0,
        hot_vector_fma=sum(1 for i, _ in inside if fma.get(i) == "p") if n_fma else 0,
        hot_stack=len(stack_accesses([t for _, t in inside])) if n_fma else 0,
        hot_vector_mul=sum(1 for _, t in inside if _VECTOR_MUL.match(t)) if n_fma else 0,
        hot_spills=sum(1 for i, _ in inside if lines[i].rstrip().endswith(("Spill", "Reload"))) if n_fma else 0)
