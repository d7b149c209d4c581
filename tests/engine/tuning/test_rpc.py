"""RPC measurement: address parsing, tuning on loopback servers, and a key with no server
refused up front. Budgets are a few measurements."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from workbench.engine.base.errors import TuneError
from workbench.engine.build.targets import DEFAULT_TARGET as TARGET
from workbench.engine.tuning.loop import tune_loops
from workbench.engine.tuning.options import TuneOptions
from workbench.engine.tuning.progress import read_progress
from workbench.engine.tuning.rpc import RpcConfig


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


def test_rpc_tuning_measures_on_the_servers(tmp_path, rpc_tracker, mm_task):
    prog = tmp_path / "progress.jsonl"
    rpc = RpcConfig.parse(f"127.0.0.1:{rpc_tracker}:wbtest")
    res = tune_loops([mm_task], TARGET, tmp_path / "wd", 4,
                     TuneOptions(rpc=rpc, progress_path=prog, num_trials_per_iter=4))["mm"]
    rows = read_progress(prog)
    assert len(rows) == res.measurements == 4
    lats = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    assert len(lats) >= 3 and all(0 < x < 1e3 for x in lats), rows
    assert res.best_ms == pytest.approx(min(lats))


def test_rpc_with_a_key_no_server_has_is_refused_at_once(tmp_path, rpc_tracker, mm_task):
    t0 = time.monotonic()
    with pytest.raises(TuneError, match="no RPC server is registered with key 'nosuch'"):
        tune_loops([mm_task], TARGET, tmp_path / "wd", 4,
                   TuneOptions(rpc=RpcConfig("127.0.0.1", rpc_tracker, "nosuch")))
    with pytest.raises(TuneError, match="cannot reach the RPC tracker"):
        tune_loops([mm_task], TARGET, tmp_path / "wd", 4,
                   TuneOptions(rpc=RpcConfig("127.0.0.1", _free_port(), "wbtest")))
    assert time.monotonic() - t0 < 60
