"""The machine's state: read from the OS, compared between two moments, written beside a run."""

from __future__ import annotations

import json

import pytest

from workbench.engine.measure.machine import MachineState, describe, differs, machine_state, steal_pct, write_machine


def test_the_state_is_read_from_the_os_and_moves_forward():
    a = machine_state()
    b = machine_state()
    assert a.vcpus >= 1 and a.threads_per_core >= 1 and a.vcpus % a.threads_per_core == 0
    assert a.clock_mhz >= 0 and a.load1 >= 0 and b.cpu_s >= a.cpu_s and b.taken_at >= a.taken_at
    assert MachineState.from_json(json.loads(json.dumps(a.to_json()))) == a
    assert differs(a, a) == ""


def test_a_state_differs_by_cores_clock_or_load_and_names_what_moved():
    a = MachineState(0.0, 4, 2, 2600.0, 1.0, 0.0, 1.0)
    assert "4 vCPUs, 2 thread(s) per core then, 4 vCPUs, 1 thread(s) per core now" in differs(
        a, MachineState(0.0, 4, 1, 2600.0, 1.0, 0.0, 1.0))
    assert differs(a, MachineState(9.0, 4, 2, 2800.0, 2.9, 5.0, 9.0)) == ""  # 8% and 1.9 of 4 vCPUs: the same
    assert "clock" in differs(a, MachineState(0.0, 4, 2, 2900.0, 1.0, 0.0, 1.0))
    assert "load" in differs(a, MachineState(0.0, 4, 2, 2600.0, 3.1, 0.0, 1.0))
    assert differs(MachineState(0.0, 4, 2, 0.0, 1.0, 0.0, 1.0), a) == ""  # an unknown clock is no change


def test_a_runs_state_is_written_with_the_steal_between_start_and_end(tmp_path):
    start, end = MachineState(0.0, 2, 1, 2600.0, 0.5, 1.0, 100.0), MachineState(60.0, 2, 1, 2600.0, 1.5, 3.0, 200.0)
    path = write_machine(tmp_path, start, end, peak_gflops={"w": 300.0})
    doc = json.loads(path.read_text())
    assert doc["steal_pct"] == pytest.approx(2.0) and doc["start"] == start.to_json() and doc["peak_gflops"] == {"w": 300.0}
    assert [p.name for p in tmp_path.iterdir()] == ["machine.json"]  # no temporary file left
    text = describe(doc)
    assert "2 vCPUs, 1 thread(s) per core" in text and "load 0.5 -> 1.5" in text and "steal over the run 2.00%" in text
    assert "FMA kernel 300 GFLOP/s" in text and describe(None) == ""
    assert steal_pct(start, MachineState(0.0, 2, 1, 0.0, 0.0, None, 300.0)) is None
