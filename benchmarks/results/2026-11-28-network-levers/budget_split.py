"""How a joint tuning's budget splits over a network's op groups: by FLOPs (the default) and by the
time each group's kernels lose on their expert schedules (``split="loss"``).

Run from the repository root: ``PYTHONPATH=. nice -n 19 .venv/bin/python
benchmarks/results/2026-11-28-network-levers/budget_split.py NETWORK BUDGET`` (NETWORK: resnet18,
mobilenet_v2; on the target the 2026-11-28-networks-budgets run tuned for). Prints one row per
group: its head op, its kernels' expert ms (timed alone on the network's buffers) and GFLOP/s,
and its measurements under each split."""

import sys
from pathlib import Path

from workbench.engine.session.session import load, new_session, replay
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.stages import joint_shares, seed_times, twin_groups


def main(network: str, budget: int) -> None:
    run = load(Path(f"benchmarks/results/2026-11-28-networks-budgets/work/{network}_b64/ours_session.json"))
    state = replay(new_session(network, target=dict(run.target)))
    times = seed_times(state)
    flops = {s.op: s.budget for s in joint_shares(state, budget, TuneOptions(split="flops"), times)}
    loss = {s.op: s.budget for s in joint_shares(state, budget, TuneOptions(split="loss"), times)}
    print(f"{network}, budget {budget}: {len(flops)} groups; "
          f"expert network's kernels sum to {sum(times.values()):.3f} ms")
    print("| group (head op, twins) | expert ms | GFLOP/s | by FLOPs | by loss |\n|---|---|---|---|---|")
    for g in twin_groups(state):
        ks = [state.home_kernel(op) for op in g]
        ms = sum(times[k] for k in ks)
        gf = sum(state.program.flops.get(k, 0) for k in ks) / ms / 1e6
        twins = f" (+{len(g) - 1})" if len(g) > 1 else ""
        print(f"| {g[0]}{twins} | {ms:.3f} | {gf:.0f} | {flops[g[0]]} | {loss[g[0]]} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
