"""The command line: ``python -m workbench replay|run|export|tune|bench|ceilings|import ...``.

It calls the same engine functions as the app. A user error (any ``WorkbenchError``, an
unreadable or unwritable path) prints one line, ``error: ...``, on stderr and exits with
status 2, without a traceback; a replay whose outputs do not match the reference exits with 1.

Each command's module adds its own subparser; a command imports its engine modules only when
it runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys

from workbench.cli import bench, import_model, replay, tune
from workbench.engine.base.errors import WorkbenchError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench", description="ALT Workbench without a browser.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    replay.register(sub)  # replay, run, export
    tune.register(sub)
    bench.register(sub)  # bench, ceilings
    import_model.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an unreadable or unwritable path the user gave
        where = f" {e.filename}" if e.filename else ""
        print(f"error: cannot access{where}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def exit_with(code: int | None) -> None:
    """Exit with ``code``; at once (``os._exit``, output flushed) while a candidate's build that
    timed out still runs on its thread: LLVM's static destructors at a normal exit would run under it."""
    runner = sys.modules.get("workbench.engine.tuning.runner")
    if runner is not None and runner.builds_left_running():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)
    sys.exit(code)

