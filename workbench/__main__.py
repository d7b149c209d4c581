"""``python -m workbench ...``: the command line, in ``workbench.cli``."""

from __future__ import annotations

from workbench.cli import exit_with, main

if __name__ == "__main__":
    exit_with(main())
