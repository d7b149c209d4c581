"""Headless replay: a session in, the final kernels out, with a report.

``replay_to(session, out_dir)`` replays the session's actions, builds the scheduled program
(every kernel after its loop steps or tuned trace), verifies it end to end against the
reference on random inputs, times each kernel and writes:

- ``kernels.so``: every kernel, a function of its name (inputs, then outputs, stored layouts);
- ``program.py``: the scheduled TVMScript of the whole module;
- ``network.so``: the whole network as one Relax VM module (``relaxnet``) that plain TVM runs;
- ``network.json`` and ``constants.npz``: what runs it kernel by kernel when ``network.so`` is
  absent (``standalone.load_network``; ``python -m workbench run``);
- ``report.json``: the checks and the times (``ReplayReport`` says what each field holds).

Nothing is written when the session does not replay or a kernel does not build.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import tvm

from ..base.errors import BuildError
from ..models.frontend.framework import framework_of, framework_outputs
from ..build.program import Program, measure, output_errors
from ..build.relaxnet import NETWORK_SO, build_network, call_signature
from .session import Session, State, replay
from ..build.standalone import write_network
from ..base.interleave import call_timer
from ..base.timing import Stats, compare, measure_until_quiet

__all__ = ["ReplayReport", "replay_to"]


@dataclass(frozen=True)
class ReplayReport:
    """What ``report.json`` holds. ``ok``: every check passed (the reference's, ``source``'s and
    ``network``'s); ``max_abs_error`` and ``max_rel_error``, also per graph output (``outputs``);
    ``total_ms``: the kernels' medians added up, with ``total_min_ms``, ``total_spread_ms``,
    ``repeats`` and ``noisy`` (a kernel stayed noisy). Per kernel: ``name``, ``latency_ms``
    (median), ``min_ms``, ``spread_ms`` (max - min over repeats), ``repeats``, ``rounds``, ``noisy``
    (see ``timing``), ``gflops``, ``flops`` and ``schedule``; a tuned kernel also ``tuned_ms`` (what
    its tuning measured: the median of one record's repeats, their spread not kept) and ``vs tuned``
    (``timing.compare``: "within noise" when that figure lies within the replay's range). Also the
    session name, target and TVM version.

    ``source`` (an imported model or a built-in network): the outputs against the framework the
    model came from (``frontend.framework``: ONNX Runtime or PyTorch) on the same random inputs:
    ``framework``, ``max_abs_error``, ``max_rel_error`` and ``ok``. ``network``: how ``network.so``
    is called (``inputs`` and ``outputs`` with their shapes, in order; plain TVM runs it as
    ``tvm.relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())["main"](*inputs)``, which
    returns the tuple of the graph outputs), its outputs against the reference (``max_abs_error``,
    ``max_rel_error``, ``ok``), its whole-network ``latency_ms`` (median) with ``min_ms`` and
    ``spread_ms``, and its ``memory`` (``relaxnet.MemoryPlan.row``: the planned peak against the
    sum of the intermediates).
    """

    ok: bool
    max_abs_error: float
    max_rel_error: float
    total_ms: float
    kernels: list[dict]
    session: str
    target: dict
    outputs: dict[str, dict]  # graph output -> {"max_abs_error", "max_rel_error"}
    tvm_version: str = tvm.__version__
    # the total's statistics (``Measurement.total``); absent from reports written before them
    total_min_ms: float | None = None
    total_spread_ms: float | None = None
    repeats: int | None = None
    noisy: bool | None = None
    source: dict | None = None  # against the model's own framework (imported models, built-in networks)
    network: dict | None = None  # network.so: its call, its check, its memory plan

    def to_json(self) -> dict:
        return asdict(self)


def replay_to(session: Session, out_dir: str | Path, target: dict | None = None,
              progress: Callable[[str], None] | None = None, seed: int = 0) -> ReplayReport:
    """Rebuild, verify and time the session's final kernels; write them to ``out_dir``.

    Parameters
    ----------
    session : Session
    out_dir : folder for ``kernels.so``, ``network.so``, ``program.py`` and ``report.json`` (created).
    target : a TVM target as a dict, replacing the session's.
    progress : called with a short message at each step (for a progress bar).
    seed : seed of the random inputs used to verify.

    Raises
    ------
    SessionError, LoopError, LayoutError
        The session does not replay (the message names the action).
    BuildError
        A kernel fails to build, run or export.
    """
    say = progress or (lambda _: None)
    if target is not None:
        session = replace(session, target=dict(target))
    say("replaying actions")
    state = replay(session)
    prog = state.scheduled_program()
    say("building, verifying against the reference")
    m = measure(prog, session.target, seed=seed, progress=lambda k: say(f"timing {k}"))
    built, ver, timings = m.built, m.verification, m.timings
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    network = _network(prog, session.target, seed, out, say)
    say("writing kernels.so, program.py, report.json")
    try:
        built.executable.export_library(str(out / "kernels.so"))
    except Exception as e:  # noqa: BLE001 - the toolchain's errors come in several types
        raise BuildError(f"could not export kernels.so: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    (out / "program.py").write_text(prog.module().script())
    write_network(prog, state.graph.random_inputs(seed), out, vm={k: network[k] for k in ("file", "inputs", "outputs")})
    tuned = _tuned_ms(state)
    total = m.total
    source = _source_check(session, state, built, seed, say)
    report = ReplayReport(
        ok=ver.ok and network["ok"] and (source is None or source["ok"]), source=source, network=network,
        max_abs_error=ver.max_abs_error, max_rel_error=ver.max_rel_error,
        total_ms=total.median_ms, total_min_ms=total.min_ms, total_spread_ms=total.spread_ms, repeats=total.repeats,
        noisy=any(t.stats.noisy for t in timings),
        kernels=[{**t.row(), "schedule": state.kernel_schedule(t.name).kind, **_vs_tuned(t.stats, tuned.get(t.name))}
                 for t in timings],
        session=session.name, target=dict(session.target),
        outputs={t: {"max_abs_error": a, "max_rel_error": r} for t, (a, r) in ver.per_output.items()})
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=1) + "\n")
    return report


def _network(prog: Program, target: dict, seed: int, out: Path, say: Callable[[str], None],
             rtol: float = 1e-4) -> dict:
    """Build the network as one Relax VM module, check it on the verification's inputs against
    the reference, export it to ``out / network.so``; its entry of the report."""
    say(f"building {NETWORK_SO} (one Relax VM module), checking it")
    values = prog.graph.random_inputs(seed)
    net = build_network(prog, values, target)
    per = output_errors(net.run(values), prog.graph.reference(values))
    rel = max(r for _, r in per.values())
    say(f"timing {NETWORK_SO}")
    main, args = net.vm()["main"], net.args(values)
    timer = call_timer(lambda: main(*args), min_ms=20.0)
    stats = measure_until_quiet(lambda: [timer() for _ in range(5)])
    net.export(str(out / NETWORK_SO))
    return {**call_signature(net), "max_abs_error": max(e for e, _ in per.values()), "max_rel_error": rel,
            "ok": rel < rtol, "latency_ms": stats.median_ms, "min_ms": stats.min_ms, "spread_ms": stats.spread_ms,
            "memory": net.memory.row()}


def _source_check(session: Session, state: State, built: Any, seed: int, say: Callable[[str], None],
                  rtol: float = 1e-4) -> dict | None:
    """The program's outputs against the model's framework on the verification's inputs (the
    errors relative to the largest output magnitude, as ``Built.verify``'s); None for a model
    the op library defines."""
    framework = framework_of(session.model)
    if framework is None:
        return None
    say(f"checking the outputs against {framework}")
    graph = state.graph
    values = graph.random_inputs(seed)
    want = framework_outputs(session.model, [values[t] for t in graph.inputs])
    got = built.run(values)
    if len(want) != len(graph.outputs):
        raise BuildError(f"{framework} gives {len(want)} outputs, the graph {len(graph.outputs)}")
    for name, ref in zip(graph.outputs, want):
        if got[name].shape != ref.shape:
            raise BuildError(f"output {name} has shape {got[name].shape}, {framework}'s {ref.shape}")
    per = output_errors({t: got[t] for t in graph.outputs}, dict(zip(graph.outputs, want)))
    abs_err, rel_err = max(e for e, _ in per.values()), max(r for _, r in per.values())
    return {"framework": framework, "max_abs_error": abs_err, "max_rel_error": rel_err, "ok": rel_err < rtol}


def _tuned_ms(state: State) -> dict[str, float]:
    """Kernel -> the latency its tuning measured, for kernels that still run their tuned trace
    (the last ``tuned`` step of a kernel is the one in force)."""
    out = {}
    for step in state.session.steps:
        if step.kind == "tuned" and step.get("latency_ms") is not None:
            out[step.target] = float(step.get("latency_ms"))
    return {k: v for k, v in out.items() if k in state.program.funcs and state.kernel_schedule(k).kind == "tuned"}


def _vs_tuned(replayed: Stats, tuned_ms: float | None) -> dict:
    """The replay against the tuner's figure, a point (the session keeps one latency per tuned kernel)."""
    if tuned_ms is None:
        return {}
    return {"tuned_ms": tuned_ms, "vs tuned": compare(replayed, Stats.of([tuned_ms]))}
