"""``replay``, ``run`` and ``export``: a session's kernels built and checked, the replayed network
run on given inputs, the session written as a MetaSchedule tuning record."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from workbench.cli.common import parse_target, status_bar


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("replay", help="rebuild a session's final kernels, verify and time them",
                       description="Load SESSION (validated by replaying it), build its scheduled program, verify "
                                   "it against the reference on random inputs and time each kernel. Writes "
                                   "DIR/kernels.so, DIR/program.py, DIR/report.json and the runnable network "
                                   "(DIR/network.so, one Relax VM module plain TVM runs; DIR/network.json, "
                                   "DIR/constants.npz: `run DIR`). Exit status: 0 when every "
                                   "output matched, 1 when one did not, 2 on an error.")
    r.add_argument("session", help="a session file (see docs/session-format.md)")
    r.add_argument("--out", metavar="DIR", help="output folder (default work/replay/NAME)")
    r.add_argument("--target", metavar="JSON", help='a TVM target as JSON, e.g. \'{"kind": "llvm", "num-cores": 2}\' '
                   "(default: the session's)")
    r.set_defaults(fn=cmd_replay)
    n = sub.add_parser("run", help="run a replayed network on inputs from .npy files",
                       description="Run the whole graph that `replay` wrote to REPLAY_DIR (network.so on the Relax "
                                   "VM; in an older folder, kernels.so kernel by kernel) on the given inputs (random "
                                   "ones for those not given), print each output's summary and the run's latency, "
                                   "and save the outputs.")
    n.add_argument("replay_dir", metavar="REPLAY_DIR")
    n.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="an input's values (FILE.npy alone for a one-input network; repeatable)")
    n.add_argument("--out", metavar="FILE", help="outputs: FILE.npy (one output) or FILE.npz (by output name)")
    n.add_argument("--seed", type=int, default=0, help="seed of the random inputs not given")
    n.add_argument("--repeat", type=int, default=10, help="timed runs after the first (0: no timing)")
    n.set_defaults(fn=cmd_run)
    e = sub.add_parser("export", help="write a session as a MetaSchedule tuning record",
                       description="Write DIR/database_workload.json and DIR/database_tuning_record.json (a "
                                   "MetaSchedule JSONDatabase: one workload per kernel, its schedule trace as the "
                                   "record), DIR/session.json and DIR/manifest.json.")
    e.add_argument("session")
    e.add_argument("--out", metavar="DIR", required=True)
    e.set_defaults(fn=cmd_export)


def cmd_replay(a: argparse.Namespace) -> int:
    from workbench.engine.session.artifacts import replay_to
    from workbench.engine.session.session import load

    bar, say = status_bar(f"replay {Path(a.session).name}")
    try:
        say("loading and validating the session")
        session = load(a.session)
        out = Path(a.out or Path("work") / "replay" / session.name)
        report = replay_to(session, out, parse_target(a.target), progress=say)
    finally:
        bar.close()
    for k in report.kernels:
        print(f"{k['name']:>28}: {k['latency_ms']:9.4f} ms median (min {k['min_ms']:.4f}, spread {k['spread_ms']:.4f} "
              f"over {k['repeats']} runs{', NOISY' if k['noisy'] else ''})  {k['gflops']:8.2f} GFLOP/s")
    print(f"{'total':>28}: {report.total_ms:9.4f} ms median (min {report.total_min_ms:.4f}, spread "
          f"{report.total_spread_ms:.4f} over {report.repeats} runs{', NOISY' if report.noisy else ''}); "
          f"max abs error {report.max_abs_error:.2e}, "
          f"max rel error {report.max_rel_error:.2e}; ok: {report.ok}; written to {out}")
    if (src := report.source) is not None:
        print(f"{'vs ' + src['framework']:>28}: max abs error {src['max_abs_error']:.2e}, "
              f"max rel error {src['max_rel_error']:.2e}; ok: {src['ok']}")
    if (net := report.network) is not None:
        mem, ins = net["memory"], ", ".join(f"{t} {tuple(s)}" for t, s in net["inputs"].items())
        print(f"{net['file']:>28}: {net['latency_ms']:9.4f} ms median (min {net['min_ms']:.4f}, spread "
              f"{net['spread_ms']:.4f}), the whole network on the Relax VM; max rel error {net['max_rel_error']:.2e}; "
              f"ok: {net['ok']}; {mem['peak_planned_mb']:.2f} MB planned for {mem['intermediates_sum_mb']:.2f} MB "
              f"of intermediates")
        print(f"{'':>28}  plain TVM: tvm.relax.VirtualMachine(tvm.runtime.load_module('{out / net['file']}'), "
              f"tvm.cpu())['main']({ins}) -> ({', '.join(net['outputs'])},)")
    if not report.ok:
        what = (f"{src['framework']}'s (max relative error {src['max_rel_error']:.2e})" if src and not src["ok"]
                else f"the reference (max relative error {report.max_rel_error:.2e})")
        print(f"error: outputs differ from {what}; see {out / 'report.json'}", file=sys.stderr)
        return 1
    return 0


def _run_inputs(texts: list[str], inputs: dict[str, tuple[int, ...]], seed: int) -> dict:
    """``NAME=FILE.npy`` (or ``FILE.npy`` for a one-input network) per input; random (seeded,
    never zeros) for those not given."""
    from workbench.engine.base.errors import SessionError

    import numpy as np

    given = {}
    for text in texts:
        name, sep, path = text.rpartition("=")
        if not sep:
            if len(inputs) != 1:
                raise SessionError(f"--input {text!r}: write NAME=FILE.npy (inputs: {', '.join(inputs)})")
            name = next(iter(inputs))
        if not path.endswith(".npy"):
            raise SessionError(f"--input {text!r}: give a NumPy .npy file")
        given[name] = np.load(path)  # allow_pickle=False: data only
    rng = np.random.default_rng(seed)
    return {**{t: rng.uniform(-1.0, 1.0, s).astype("float32") for t, s in inputs.items() if t not in given}, **given}


def cmd_run(a: argparse.Namespace) -> int:
    import numpy as np

    from workbench.engine.build.standalone import load_network

    net = load_network(a.replay_dir)
    values = _run_inputs(a.input or [], net.inputs, a.seed)
    outs = net(**values)
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        net(**values)
        times.append((time.perf_counter() - t0) * 1e3)
    for t, v in outs.items():
        print(f"{t}: shape {tuple(v.shape)}, min {v.min():.4g}, mean {v.mean():.4g}, max {v.max():.4g}")
    if times:
        print(f"{net.name}: {float(np.median(times)):.4f} ms median over {len(times)} runs (min {min(times):.4f}; "
              f"{'network.so on the Relax VM' if net.engine == 'relax-vm' else 'kernels.so, kernel by kernel'})")
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix == ".npy" and len(outs) == 1:
            np.save(out, next(iter(outs.values())))
        elif out.suffix == ".npz":
            np.savez(out, **outs)
        else:
            from workbench.engine.base.errors import SessionError

            raise SessionError(f"--out {a.out}: give a .npz file (a .npy holds one output; this network has "
                               f"{len(outs)})" if out.suffix == ".npy" else f"--out {a.out}: give a .npy or .npz file")
        print(f"written to {out}")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from workbench.engine.session.export import export_session
    from workbench.engine.session.session import load

    bar, say = status_bar(f"export {Path(a.session).name}")
    try:
        say("loading and validating the session")
        session = load(a.session)
        out = export_session(session, a.out, progress=say)
    finally:
        bar.close()
    manifest = json.loads((out / "manifest.json").read_text())
    for k in manifest["kernels"]:
        print(f"{k['name']:>28}: {k['latency_ms']:9.4f} ms  workload {k['workload_hash']}  ({k['schedule']})")
    print(f"MetaSchedule database (database_workload.json, database_tuning_record.json), session.json and "
          f"manifest.json written to {out}")
    return 0

