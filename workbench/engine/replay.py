"""Headless replay: a session file in, the final kernels out, with a report.

``replay_to(session, out_dir)`` writes ``kernels.so`` (loadable with
``tvm.runtime.load_module``), ``program.py`` (the scheduled TVMScript of every kernel) and
``report.json`` (``ok``, errors against the reference, per-kernel latency and GFLOP/s).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

from .errors import BuildError
from .session import Session, replay

__all__ = ["ReplayReport", "replay_to"]


@dataclass(frozen=True)
class ReplayReport:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    total_ms: float
    kernels: list[dict]
    session: str
    target: dict

    def to_json(self) -> dict:
        return asdict(self)


def replay_to(session: Session, out_dir: str | Path, target: dict | None = None,
              progress: Callable[[str], None] | None = None) -> ReplayReport:
    """Rebuild, verify and time the session's final kernels; write them to ``out_dir``."""
    say = progress or (lambda _: None)
    if target is not None:
        session = replace(session, target=dict(target))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say("replaying actions")
    state = replay(session)
    prog = state.scheduled_program()
    say("building")
    built = prog.build(session.target)
    say("verifying against the reference")
    ver = built.verify()
    timings = built.time(progress=lambda k: say(f"timing {k}"))
    try:
        built.executable.export_library(str(out / "kernels.so"))
    except Exception as e:
        raise BuildError(f"could not export kernels.so: {str(e).splitlines()[0]}") from None
    (out / "program.py").write_text(prog.module().script())
    report = ReplayReport(ver.ok, ver.max_abs_error, ver.max_rel_error, sum(t.latency_ms for t in timings),
                          [{"name": t.name, "latency_ms": t.latency_ms, "spread_ms": t.spread_ms,
                            "gflops": t.gflops, "flops": t.flops} for t in timings],
                          session.name, session.target)
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=1) + "\n")
    return report
