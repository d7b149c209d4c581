"""``python -m workbench ...``: the command line, in ``workbench.cli``."""

from __future__ import annotations

from workbench.cli import exit_with, main, parser  # noqa: F401 (main, parser: callers import them from here too)

if __name__ == "__main__":
    exit_with(main())
