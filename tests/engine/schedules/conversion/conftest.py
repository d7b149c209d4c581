"""Fixtures of the conversion schedules' tests."""

from __future__ import annotations

import pytest

from workbench.engine.schedules.conversion import traffic


@pytest.fixture
def caches(monkeypatch):
    """The order model on fixed caches (32 KiB L1, 512 KiB L2, 64 B lines): the orders the tests
    check do not depend on the machine the tests run on."""
    monkeypatch.setattr(traffic, "cache_info", lambda: ({"L1d": 32 << 10, "L2": 512 << 10, "L3": 32 << 20}, 64, ""))
    monkeypatch.setattr(traffic.mmap, "PAGESIZE", 4096)
