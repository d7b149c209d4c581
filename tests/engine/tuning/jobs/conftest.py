"""Shared by the job tests: a queue of the test's own, and the replays counted."""

import pytest

from workbench.engine.tuning.jobs.handle import JobQueue


@pytest.fixture
def queue(tmp_path) -> JobQueue:
    """A queue of this test's own: jobs of other tests or of a running app never delay it."""
    return JobQueue(tmp_path / "jobs", limit=1)


@pytest.fixture
def replays(monkeypatch) -> list[str]:
    """The sessions replayed from here on (their keys), counted at ``session.replay``."""
    from workbench.engine.session import session as session_module

    real, seen = session_module.replay, []
    monkeypatch.setattr(session_module, "replay", lambda s: seen.append(s.key()) or real(s))
    return seen
