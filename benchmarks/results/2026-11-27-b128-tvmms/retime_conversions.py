"""The conversions of this run's joint layouts timed again, as the benchmark now times them
(``bench.conversions_timer``, in a process that tuned nothing), and the ratios with them.
usage, from the repository root: PYTHONPATH=. python benchmarks/results/2026-11-27-b128-tvmms/retime_conversions.py"""
import csv
import re
from pathlib import Path

import numpy as np

from workbench.bench import suite as bench
from workbench.engine.layout.book import LayoutBook
from workbench.engine.base.interleave import interleaved_samples
from workbench.engine.layout.keys import apply_actions
from workbench.engine.layout.presets import preset_actions
from workbench.engine.build.targets import DEFAULT_TARGET, use_all_cores

here = Path(__file__).parent
use_all_cores()
target = dict(DEFAULT_TARGET)
suite = {w.name: w for w in bench.load_suite("benchmarks/suite.json")}
rows = list(csv.DictReader((here / "results.csv").open()))
out = []
for r in rows:
    m = re.fullmatch(r"(\w+)\((.*)\)", r["joint_layout"])
    if not m:  # the default layout converts nothing
        continue
    graph, op = bench.workload_graph(suite[r["workload"]])
    params = eval(f"dict({m.group(2)})")  # noqa: S307 - this run's own labels
    book = apply_actions(graph, LayoutBook(), preset_actions(graph, m.group(1), op, **params))
    built, ok = bench._tuned(graph, book, op, None, target)
    timer = bench.conversions_timer(built, graph.random_inputs())
    ms = float(np.median(interleaved_samples({"c": timer}, 7)["c"]))
    joint = float(r["joint_ms"])
    out.append(dict(workload=r["workload"], conversions_ms_in_run=float(r["joint_conversions_ms"]),
                    conversions_ms_retimed=ms, verified=ok,
                    with_conversions_vs_seeded=float(r["metaschedule_ms"]) / (joint + ms),
                    with_conversions_vs_tvm_defaults=float(r["tvm_metaschedule_ms"]) / (joint + ms)))
    print(out[-1], flush=True)
ratios = {r["workload"]: r for r in out}
gm = lambda k, dflt: float(np.exp(np.mean([np.log(ratios[r["workload"]][k] if r["workload"] in ratios else float(r[dflt]))
                                            for r in rows])))
print("geomean with conversions vs seeded:", round(gm("with_conversions_vs_seeded", "joint_with_conversions_vs_metaschedule"), 3),
      "vs TVM defaults:", round(gm("with_conversions_vs_tvm_defaults", "joint_with_conversions_vs_tvm_metaschedule"), 3))
with (here / "conversions_retimed.csv").open("w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(out[0]))
    wr.writeheader()
    wr.writerows(out)
