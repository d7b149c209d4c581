"""Shared by the job tests: a queue of the test's own, and the replays counted."""

import pytest

from workbench.engine.tuning.jobs.handle import JobQueue


@pytest.fixture
def queue(tmp_path) -> JobQueue:
    """A queue of this test's own: jobs of other tests or of a running app never delay it."""
    return JobQueue(tmp_path / "jobs", limit=1)


@pytest.fixture
def replays(monkeypatch) -> list[str]:
    """The sessions replayed from here on (their keys), counted at ``State.of`` (where every
    ``replay`` starts): a module that imported ``replay`` by name is counted too."""
    from workbench.engine.session.session import State

    real, seen = State.of, []
    monkeypatch.setattr(State, "of", staticmethod(lambda s: seen.append(s.key()) or real(s)))
    return seen
