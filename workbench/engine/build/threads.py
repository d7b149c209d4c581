"""Small kernels that run on the calling thread: no thread-pool launch for a few microseconds of work.

Every parallel loop of a kernel is a launch of TVM's thread pool: the workers are woken (or
found spinning), share the loop, and meet at a barrier before the kernel returns. For a kernel
of a few microseconds the launch and the barrier cost about as much as the work, and on a busy
machine a worker that is not scheduled at once holds the barrier for a scheduler tick. A
network's tiny kernels (a global pool, a reshape, a small LayerNorm) can be
built with their parallel loops made serial (``single_threaded``; ``relaxnet.build_network``'s
``single_thread``) when that is asked for: ``tiny_kernels`` picks them by their work (FLOPs and
bytes touched), which is known before anything is timed.
"""

from __future__ import annotations

import numpy as np
import tvm_ffi
from tvm import tirx

from ..loops.nest import visit_nodes
from .program import Program

__all__ = ["TINY_FLOPS", "TINY_BYTES", "SINGLE_THREAD_ATTR", "parallel_loops", "single_threaded", "tiny_kernels"]

#: a kernel with at most this many FLOPs and ``TINY_BYTES`` of arguments is tiny: on one core
#: it runs in about the time a thread-pool launch and barrier take
TINY_FLOPS = 500_000
TINY_BYTES = 256 << 10
#: the attribute a kernel made single-threaded carries (so a built module says which ones were)
SINGLE_THREAD_ATTR = "workbench.single_thread"


def parallel_loops(func: tirx.PrimFunc) -> int:
    """How many parallel loops ``func`` has (each is one thread-pool launch per time it is reached)."""
    found = []
    visit_nodes(func.body, lambda n: found.append(n) if isinstance(n, tirx.For) and n.kind == tirx.ForKind.PARALLEL
                else None)
    return len(found)


def _serial(loop: tirx.For) -> tirx.For:
    if loop.kind != tirx.ForKind.PARALLEL:
        return loop
    return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body, loop.thread_binding,
                    loop.annotations, loop.step)


def single_threaded(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every parallel loop made serial (the same loops, order and vectors), marked
    with ``SINGLE_THREAD_ATTR``."""
    return tvm_ffi.structural_map(func, (tirx.For, _serial)).with_attr(SINGLE_THREAD_ATTR, True)


def _bytes(program: Program, buffers: list[str]) -> int:
    return sum(int(np.prod([int(s) for s in program.plan.buffers[b].layout.shape], dtype=np.int64)) * 4
               for b in buffers)


def tiny_kernels(program: Program, flops: int = TINY_FLOPS, nbytes: int = TINY_BYTES) -> list[str]:
    """The kernels (in plan order) with parallel loops, at most ``flops`` FLOPs and at most
    ``nbytes`` of arguments (inputs and outputs as stored)."""
    return [k.name for k in program.plan.kernels
            if program.flops.get(k.name, 0) <= flops and _bytes(program, k.inputs + k.outputs) <= nbytes
            and parallel_loops(program.funcs[k.name])]
