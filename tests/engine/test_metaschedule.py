"""Loop-only MetaSchedule stage: progress lines, re-applicable traces, resume, failing
candidates, RPC measurement on loopback, and RPC address parsing. Budgets are a few measurements."""

import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tvm
from tvm import te

from workbench.engine.errors import TuneError
from workbench.engine.metaschedule import RpcConfig, TuneTask, budget_shares, read_progress, tune_loops

TARGET = {"kind": "llvm", "num-cores": 2}
FIELDS = {"task", "stage", "trial", "layout", "trace_id", "latency_ms", "error", "predicted", "best_ms", "time"}


def matmul(n: int = 64) -> tvm.tirx.PrimFunc:
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def mm_task(n: int = 64) -> TuneTask:
    return TuneTask("mm", matmul(n), 2 * n ** 3)


########## Local tuning ##########

def test_tune_loops_writes_progress_and_a_trace_that_rebuilds_the_kernel(tmp_path, rng):
    task, prog = mm_task(), tmp_path / "progress.jsonl"
    res = tune_loops([task], TARGET, tmp_path / "wd", 8, progress_path=prog, num_trials_per_iter=4, seed=0,
                     layout_label="default")["mm"]
    rows = read_progress(prog)
    assert len(rows) == res.measurements == 8
    assert all(set(r) == FIELDS for r in rows)
    assert [r["trial"] for r in rows] == list(range(1, 9))
    assert {(r["task"], r["stage"], r["layout"]) for r in rows} == {("mm", "loop", "default")}
    assert len({r["trace_id"] for r in rows}) == 8  # no candidate measured twice
    lats = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    assert lats and res.best_ms == pytest.approx(min(lats)) and res.gflops > 0
    bests = [r["best_ms"] for r in rows if r["best_ms"] is not None]
    assert bests == sorted(bests, reverse=True) and bests[-1] == pytest.approx(res.best_ms)

    # the best trace re-applies to the task's PrimFunc and the kernel matches NumPy
    lib = tvm.compile(tvm.IRModule({"main": res.scheduled(task.func)}), target=tvm.target.Target(TARGET))
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    dev = tvm.cpu()
    c = tvm.runtime.tensor(np.zeros((64, 64), "float32"), dev)
    lib["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)

    # resume: the records already there count toward the budget, so nothing more is measured
    again = tune_loops([task], TARGET, tmp_path / "wd", 8, progress_path=prog)["mm"]
    assert again == res and len(read_progress(prog)) == 8


def test_a_candidate_that_fails_to_build_is_recorded_and_tuning_goes_on(tmp_path):
    prog = tmp_path / "progress.jsonl"
    res = tune_loops([mm_task()], TARGET, tmp_path / "wd", 4, progress_path=prog, num_trials_per_iter=2, seed=0,
                     build_timeout_s=0.001)["mm"]
    rows = read_progress(prog)
    assert [r["trial"] for r in rows] == [1, 2, 3, 4]  # both batches ran
    assert all(r["latency_ms"] is None and r["best_ms"] is None for r in rows)
    assert all(r["error"].startswith("LocalBuilder: Timeout") for r in rows)
    assert (res.best_ms, res.trace, res.measurements, res.failed) == (None, None, 4, 4)
    with pytest.raises(TuneError, match="no successful measurement"):
        res.scheduled(matmul())


def test_budget_is_shared_by_flops_and_bad_requests_are_refused(tmp_path):
    assert budget_shares([1, 1, 1], 3) == [1, 1, 1]
    assert sum(budget_shares([5, 7, 100, 3], 17)) == 17
    with pytest.raises(TuneError, match="one"):
        budget_shares([1, 1, 1], 2)
    with pytest.raises(TuneError, match="num-cores"):
        tune_loops([mm_task()], {"kind": "llvm"}, tmp_path, 4)
    with pytest.raises(TuneError, match="unique"):
        tune_loops([mm_task(), mm_task()], TARGET, tmp_path, 4)
    with pytest.raises(TuneError, match="identifier"):
        TuneTask("not a name", matmul(), 1)


########## RPC ##########

@pytest.mark.parametrize("text, match", [
    ("127.0.0.1:9190", "HOST:PORT:KEY"),
    ("9190:local", "HOST:PORT:KEY"),
    (":9190:local", "host is missing"),
    ("127.0.0.1:port:local", "port must be a number"),
    ("127.0.0.1:70000:local", "port must be a number"),
    ("127.0.0.1:0:local", "port must be a number"),
    ("127.0.0.1:9190:", "key is missing"),
    ("127.0.0.1:9190:my key", "key 'my key' may only hold"),
    ("local host:9190:k", "not a host name"),
])
def test_rpc_address_errors_name_the_bad_part(text, match):
    with pytest.raises(TuneError, match=match):
        RpcConfig.parse(text)


def test_rpc_address_round_trips():
    for text in ("127.0.0.1:9190:local", "[::1]:9191:pi-4.b_2", "localhost:1:x"):
        assert str(RpcConfig.parse(text)) == text
    assert RpcConfig.parse(" 127.0.0.1:9190:local ") == RpcConfig("127.0.0.1", 9190, "local")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _servers(port: int, key: str) -> int:
    try:
        return RpcConfig("127.0.0.1", port, key).servers()
    except TuneError:
        return -1


@pytest.fixture(scope="module")
def rpc_tracker(tmp_path_factory):
    """An RPC tracker and two servers with key ``wbtest``, on loopback only; yields the tracker port.
    Each runs in its own process group (they fork popen workers that hold the ports)."""
    tmp = tmp_path_factory.mktemp("rpc")
    env = {**os.environ, "TMPDIR": str(tmp)}
    port = _free_port()
    cmds = [["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1)]]
    for _ in range(2):
        p = _free_port()
        cmds.append(["tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(p), "--port-end", str(p + 20),
                     "--tracker", f"127.0.0.1:{port}", "--key", "wbtest", "--custom-addr", "127.0.0.1"])
    procs = []

    def kill_all() -> None:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(10)

    try:
        for i, cmd in enumerate(cmds):
            with open(tmp / f"rpc{i}.log", "wb") as log:
                procs.append(subprocess.Popen([sys.executable, "-m", *cmd], env=env, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True))
            if i == 0:
                time.sleep(1.0)
        end = time.monotonic() + 90
        while _servers(port, "wbtest") < 2:
            assert time.monotonic() < end, "the RPC servers did not register: " + " | ".join(
                (tmp / f"rpc{i}.log").read_text()[-300:] for i in range(3))
            time.sleep(0.5)
        yield port
    finally:
        kill_all()


def test_rpc_tuning_measures_on_the_servers(tmp_path, rpc_tracker):
    prog = tmp_path / "progress.jsonl"
    rpc = RpcConfig.parse(f"127.0.0.1:{rpc_tracker}:wbtest")
    res = tune_loops([mm_task()], TARGET, tmp_path / "wd", 4, progress_path=prog, num_trials_per_iter=4, seed=0,
                     rpc=rpc)["mm"]
    rows = read_progress(prog)
    assert len(rows) == res.measurements == 4
    lats = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    assert len(lats) >= 3 and all(0 < x < 1e3 for x in lats), rows
    assert res.best_ms == pytest.approx(min(lats))


def test_rpc_with_a_key_no_server_has_is_refused_at_once(tmp_path, rpc_tracker):
    t0 = time.monotonic()
    with pytest.raises(TuneError, match="no RPC server is registered with key 'nosuch'"):
        tune_loops([mm_task()], TARGET, tmp_path / "wd", 4, rpc=RpcConfig("127.0.0.1", rpc_tracker, "nosuch"))
    with pytest.raises(TuneError, match="cannot reach the RPC tracker"):
        tune_loops([mm_task()], TARGET, tmp_path / "wd", 4, rpc=RpcConfig("127.0.0.1", _free_port(), "wbtest"))
    assert time.monotonic() - t0 < 60
