"""Targets: the machine's physical cores for TVM's runtime threads, and the vector unit."""

from __future__ import annotations

import os

import pytest

from workbench.engine.build import targets


@pytest.mark.parametrize("siblings, per_core", [("0", 1), ("0-1", 2), ("0,4", 2), ("0-3", 4)])
def test_runtime_threads_counts_physical_cores(tmp_path, monkeypatch, siblings, per_core):
    (tmp_path / "thread_siblings_list").write_text(siblings + "\n")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert targets.runtime_threads(tmp_path) == 8 // per_core


def test_runtime_threads_without_topology_counts_every_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert targets.runtime_threads(tmp_path / "missing") == 3


def test_use_all_cores_keeps_a_users_choice(monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    targets.use_all_cores()
    assert os.environ["TVM_NUM_THREADS"] == "1"
    monkeypatch.delenv("TVM_NUM_THREADS")
    targets.use_all_cores()
    assert os.environ["TVM_NUM_THREADS"] == str(targets.runtime_threads())


def test_a_build_sets_the_runtime_threads_first(monkeypatch):
    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    targets.target_from({"kind": "llvm", "num-cores": 2})
    assert os.environ["TVM_NUM_THREADS"] == str(targets.runtime_threads())
