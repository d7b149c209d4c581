"""A/B of the single-thread lever on network.so: the same tuned session built twice, without
(A: every kernel on the thread pool) and with (B: ``threads.tiny_kernels`` single-threaded),
outputs compared, then timed in alternating rounds (A B, A B, ...) on the same machine.

Run from the repository root: ``PYTHONPATH=. nice -n 19 .venv/bin/python
benchmarks/results/2026-11-28-network-levers/single_thread_ab.py NAME [ROUNDS [SAMPLE_MS]]`` (NAME: a
folder of ``benchmarks/results/2026-11-28-networks-budgets/work``). Medians of the samples, their
10th percentiles (the rounds the machine's other work disturbed least) and the per-round ratio B/A."""

import sys
import time
from pathlib import Path

import numpy as np

from workbench.engine.base.interleave import call_timer, interleaved_samples
from workbench.engine.build.relaxnet import build_network
from workbench.engine.build.threads import tiny_kernels
from workbench.engine.session.session import load, replay

WORK = Path("benchmarks/results/2026-11-28-networks-budgets/work")


def main(name: str, rounds: int, sample_ms: float) -> None:
    state = replay(load(WORK / name / "ours_session.json"))
    prog, target = state.scheduled_program(), state.session.target
    values = state.graph.random_inputs(0)
    tiny = tiny_kernels(prog)
    t0 = time.time()
    nets = {"A_pool": build_network(prog, values, target, single_thread=()),
            "B_single": build_network(prog, values, target, single_thread=tiny)}
    print(f"{name}: {len(tiny)} of {len(prog.plan.kernels)} kernels single-threaded in B ({' '.join(tiny)}); "
          f"built in {time.time() - t0:.0f} s", flush=True)
    (a,), (b,) = (n.run(values).values() for n in nets.values())
    print(f"max |A - B| = {np.abs(a - b).max():.3g}")
    timers = {}
    for label, net in nets.items():
        main_fn, args = net.vm()["main"], net.args(values)
        timers[label] = call_timer(lambda f=main_fn, a=args: f(*a), min_ms=sample_ms)
    s = interleaved_samples(timers, rounds, settle_s=0.2)
    ratio = np.array(s["B_single"]) / np.array(s["A_pool"])
    for label, xs in s.items():
        m = float(np.median(xs))
        print(f"  {label:9s} median {m:.3f} ms, 10th percentile {np.percentile(xs, 10):.3f}, min {min(xs):.3f}, "
              f"quartiles {np.percentile(xs, 25):.3f}-{np.percentile(xs, 75):.3f}")
    print(f"  B/A per round: median {np.median(ratio):.3f}, quartiles {np.percentile(ratio, 25):.3f}-"
          f"{np.percentile(ratio, 75):.3f}, B faster in {int((ratio < 1).sum())} of {rounds} rounds")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30, float(sys.argv[3]) if len(sys.argv) > 3 else 50.0)
