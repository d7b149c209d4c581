"""Where the time outside the kernels goes: each kernel of a tuned network timed in network order
(as the network runs it: caches as the kernel before left them) and right after a run of itself
(warm, as ``Built.time`` times it), alternating passes with network.so's whole call. Run with
``TVM_NUM_THREADS=1`` so that the load of a shared machine does not stall a thread-pool barrier:
what is left is the caches and the hand-overs.

``TVM_NUM_THREADS=1 PYTHONPATH=. nice -n 19 .venv/bin/python
benchmarks/results/2026-11-28-network-levers/cold_warm.py NAME [PASSES]`` (NAME: a folder of
``benchmarks/results/2026-11-28-networks-budgets/work``)."""

import sys
import time
from pathlib import Path

import numpy as np

from workbench.engine.build.relaxnet import build_network
from workbench.engine.session.session import load, replay

WORK = Path("benchmarks/results/2026-11-28-networks-budgets/work")


def main(name: str, passes: int) -> None:
    state = replay(load(WORK / name / "ours_session.json"))
    prog, target = state.scheduled_program(), state.session.target
    values = state.graph.random_inputs(0)
    built = prog.build(target)
    net = build_network(prog, values, target)
    vm_main, vm_args = net.vm()["main"], net.args(values)
    bufs = built._buffers(values)
    calls = [(built.rt[k.name], [bufs[b] for b in k.inputs + k.outputs]) for k in prog.plan.kernels]
    clock = time.perf_counter

    def in_order() -> list[float]:
        out = []
        for fn, args in calls:
            t = clock()
            fn(*args)
            out.append(clock() - t)
        return out

    def warm() -> list[float]:
        out = []
        for fn, args in calls:
            fn(*args)
            t = clock()
            fn(*args)
            out.append(clock() - t)
        return out

    def whole() -> float:
        t = clock()
        vm_main(*vm_args)
        return clock() - t

    for _ in range(3):
        in_order(), warm(), whole()
    seq, hot, vm = [], [], []
    for _ in range(passes):
        seq.append(in_order())
        hot.append(warm())
        vm.append(whole())
    # per kernel, the fastest of its passes: the one the machine's other work disturbed least
    s, w = np.min(seq, 0) * 1e3, np.min(hot, 0) * 1e3
    print(f"{name}, {passes} passes, 1 thread: network.so fastest {min(vm) * 1e3:.3f} ms (median "
          f"{np.median(vm) * 1e3:.3f}); kernels in network order {s.sum():.3f} ms; warm {w.sum():.3f} ms "
          f"(in order / warm {s.sum() / w.sum():.3f}); fastest pass in network order {min(map(sum, seq)) * 1e3:.3f} "
          f"ms, warm {min(map(sum, hot)) * 1e3:.3f} ms")
    names = [k.name for k in prog.plan.kernels]
    for i in np.argsort(w - s)[:6]:
        print(f"  {names[i]:10s} in order {s[i]:.4f} ms, warm {w[i]:.4f} ms ({s[i] / w[i]:.2f}x)")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30)
