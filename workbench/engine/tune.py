"""Session-level auto-tuning: the joint layout+loop stage over every complex op, or the
loop-only stage over every kernel with the layouts frozen. Results are appended to the
session as ``tuned`` actions, so ``replay`` rebuilds the tuned kernels with no tuning.

Progress goes to a JSON-lines file (one line per measurement, see ``metaschedule``); the
app and the CLI read it. Each stage keeps its MetaSchedule databases under ``work_dir``, so a
run that was stopped loses no completed measurement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .errors import TuneError
from .joint import Candidate, joint_tune
from .metaschedule import RpcConfig, TuneTask, tune_loops
from .session import Session, replay

__all__ = ["STAGES", "tune_session", "budget_split"]

STAGES = ("joint", "loop")


def budget_split(weights: dict[str, float], budget: int, minimum: int = 2) -> dict[str, int]:
    """Share ``budget`` measurements in proportion to ``weights`` (FLOPs), at least ``minimum`` each.

    >>> budget_split({"a": 3.0, "b": 1.0}, 16)
    {'a': 12, 'b': 4}
    """
    total = sum(weights.values()) or 1.0
    out = {k: max(minimum, int(budget * w / total)) for k, w in weights.items()}
    biggest = max(out, key=lambda k: weights[k])
    out[biggest] += max(0, budget - sum(out.values()))
    return out


def tune_session(session: Session, stage: str, budget: int, work_dir: Path, *, rpc: RpcConfig | None = None,
                 progress_path: Path | None = None, joint_fraction: float = 0.3, search: str = "model",
                 seed: int = 0, on_candidate: Callable[[str, Candidate, float | None], None] | None = None,
                 isolated: bool = False) -> Session:
    """Tune and return the session with the results applied as ``tuned`` actions.

    ``isolated`` measures candidates in TVM's worker processes instead of this one (slower;
    tuning already runs in a worker process of its own, see ``worker``)."""
    if stage not in STAGES:
        raise TuneError(f"stage must be one of {STAGES}, got {stage!r}")
    if budget < 1:
        raise TuneError(f"budget must be a positive number of measurements, got {budget}")
    work_dir = Path(work_dir)
    state = replay(session)
    graph, prog = state.graph, state.program
    if stage == "joint":
        ops = [k.head for k in prog.plan.kernels if k.ops and graph.node(k.head).kind == "complex"]
        if not ops:
            raise TuneError(f"{graph.name} has no complex op to tune layouts for")
        if budget < 2 * len(ops):
            raise TuneError(f"a joint budget of {budget} measurements is too small for {len(ops)} complex ops "
                            f"({', '.join(ops)}): give at least {2 * len(ops)} (two each)")
        shares = budget_split({op: float(graph.flops(op)) for op in ops}, budget)
        for op in ops:
            res = joint_tune(graph, replay(session).book, op, session.target, work_dir / "joint" / op, shares[op],
                             joint_fraction=joint_fraction, search=search, progress_path=progress_path, rpc=rpc,
                             seed=seed, on_candidate=(lambda c, s, op=op: on_candidate(op, c, s)) if on_candidate else None,
                             isolated=isolated)
            session = session.push(res.action(graph))
        return session
    tasks = [TuneTask(k.name, prog.funcs[k.name], max(prog.flops.get(k.name, 0), 1)) for k in prog.plan.kernels]
    results = tune_loops(tasks, session.target, work_dir / "loop", budget, stage="loop",
                         progress_path=progress_path, rpc=rpc, seed=seed, isolated=isolated)
    for name, r in results.items():
        if r.best_ms is not None:
            session = session.push({"kind": "tuned", "op": name, "stage": "loop", "trace": r.trace,
                                    "latency_ms": r.best_ms, "measurements": r.measurements})
    return session
