"""``bench --retime RUN``: the interleaved rounds of a finished suite run again, without tuning.

The rounds after tuning are what a run reports, and they only mean something on an idle
machine. Tuning takes an hour; the rounds take minutes. So a run whose rounds were disturbed is
timed again here: each tuner's best kernel is rebuilt from the MetaSchedule databases the run
left in ``RUN/work`` (the joint kernel from the candidate its ``joint_layout`` names), checked
against the reference, and timed with the expert schedule, the in-run peak and the libraries as
``bench`` times them. The tuning columns are the run's own.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .suite import BenchRow, TimingRounds, Workload, joint_timers, kernel_timers, workload_graph
from workbench.engine.layout.book import LayoutBook
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.ir.graph import Graph
from workbench.engine.base.interleave import ROUNDS, Timer
from workbench.engine.layout.keys import apply_actions
from workbench.engine.measure.library import LIBRARIES, Sidecar
from workbench.engine.build.program import make_program
from workbench.engine.build.targets import vector_unit
from workbench.engine.tuning.database import best_record, open_database
from workbench.engine.tuning.joint import layout_space

__all__ = ["retime"]

#: The run's own tuning columns, copied into the new row.
TUNING = ("joint_layout", "joint_s_per_measurement", "loop_only_tuning_ms", "metaschedule_tuning_ms",
          "joint_tuning_ms")


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


def _best_trace(dirs: list[Path], func: Any) -> Any:
    """The fastest record of ``func`` in the databases of ``dirs``."""
    found = [(ms, trace) for d in dirs if d.is_dir() for ms, trace, _ in [best_record(open_database(d), func)]
             if ms is not None]
    if not found:
        raise WorkbenchError(f"no measured record of this kernel in {', '.join(str(d) for d in dirs)}")
    return min(found, key=lambda x: x[0])[1]


def _rebuilt(graph: Graph, op: str, old: dict[str, str], work: Path, target: dict,
             values: dict[str, np.ndarray], timers: dict[str, Timer]) -> dict[str, Any]:
    """Each tuner's best kernel rebuilt from ``work`` into ``timers``; the row's tuning fields."""
    default = make_program(graph).funcs[op]
    ok = all(kernel_timers(graph, LayoutBook(), op, _best_trace([work / tuner], default), target, values, timers,
                           tuner) for tuner in ("loop_only", "metaschedule"))
    label = old["joint_layout"]
    cand = next((c for c in layout_space(graph, op, vector_unit(target).lanes) if c.label == label), None)
    if cand is None:
        raise WorkbenchError(f"{old['workload']}: the joint layout {label!r} is not in this op's layout space")
    book = apply_actions(graph, LayoutBook(), cand.actions(graph, op))
    trace = _best_trace(sorted((work / "joint").glob("cand*")), make_program(graph, book).funcs[op])
    ok_j, moved = joint_timers(graph, book, op, trace, target, values, timers)
    fields: dict[str, Any] = {k: (old[k] if k == "joint_layout" else _number(old[k])) for k in TUNING}
    return {**fields, "joint_conversion_bytes": moved, "verified": ok and ok_j}


def retime(run_dir: Path, suite: list[Workload], out_dir: Path, target: dict, *, rounds: int = ROUNDS,
           libraries: tuple[str, ...] = LIBRARIES, on_step: Callable[[str], None] | None = None) -> list[BenchRow]:
    """Time the kernels of the suite run in ``run_dir`` again (the workloads of ``suite`` it
    holds); results and ``machine.json`` go to ``out_dir``, as ``bench`` writes them."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if not (run_dir / "results.csv").is_file() or not (run_dir / "work").is_dir():
        raise WorkbenchError(f"{run_dir} is not a finished suite run (no results.csv and work/ there)")
    with (run_dir / "results.csv").open(newline="") as f:
        old = {r["workload"]: r for r in csv.DictReader(f)}
    if int(next(iter(old.values()), {}).get("budget") or 0) <= 0:
        raise WorkbenchError(f"{run_dir} tuned nothing (budget 0): run `bench --budget 0` again instead")
    chosen = [w for w in suite if w.name in old]
    if not chosen:
        raise WorkbenchError(f"no workload of the suite is in {run_dir / 'results.csv'}")
    out_dir.mkdir(parents=True, exist_ok=True)
    say = on_step or (lambda s: None)
    rows: list[BenchRow] = []
    with Sidecar() as sidecar:
        timing = TimingRounds.begin(target, rounds, libraries, sidecar, say)
        for w in chosen:
            graph, op = workload_graph(w)
            values = graph.random_inputs()
            timers: dict[str, Timer] = {}
            say(f"{w.name}: the tuners' best kernels, rebuilt from {run_dir / 'work' / w.name}")
            tuned = _rebuilt(graph, op, old[w.name], run_dir / "work" / w.name, target, values, timers)
            rows.append(timing.row(w, graph, op, int(old[w.name]["budget"]), values, timers, tuned, say))
            timing.write(out_dir, rows)
    return rows
