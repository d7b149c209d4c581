"""Measurement on a TVM RPC tracker's servers: ``RpcConfig`` (``HOST:PORT:KEY``), checked before
any worker pool starts, and a session request with a deadline."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

import tvm.s_tir.meta_schedule as ms

from ..base.errors import TuneError
from .startup import import_tensor_intrinsics

__all__ = ["RpcConfig"]

_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")
_HOST = re.compile(r"^[A-Za-z0-9_.:-]+$")


@dataclass(frozen=True)
class RpcConfig:
    """Where to measure: a TVM RPC tracker and the device key its servers registered with.

    ``timeout_s`` bounds the wait for a free server and one measurement session."""

    host: str
    port: int
    key: str
    timeout_s: float = 120.0

    @staticmethod
    def parse(text: str) -> RpcConfig:
        """Read ``HOST:PORT:KEY`` (an IPv6 host goes in brackets).

        >>> RpcConfig.parse("127.0.0.1:9190:local")
        RpcConfig(host='127.0.0.1', port=9190, key='local', timeout_s=120.0)
        >>> RpcConfig.parse("[::1]:9190:pi4").host
        '::1'
        >>> RpcConfig.parse("127.0.0.1:local")
        Traceback (most recent call last):
        ...
        workbench.engine.base.errors.TuneError: an RPC address is HOST:PORT:KEY (e.g. 127.0.0.1:9190:local), got '127.0.0.1:local'
        """
        text = str(text).strip()
        parts = text.rsplit(":", 2)
        if len(parts) != 3:
            raise TuneError(f"an RPC address is HOST:PORT:KEY (e.g. 127.0.0.1:9190:local), got {text!r}")
        host, port, key = parts
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host:
            raise TuneError(f"the RPC tracker host is missing in {text!r} (HOST:PORT:KEY)")
        if not _HOST.match(host):
            raise TuneError(f"the RPC tracker host {host!r} is not a host name or IP address")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise TuneError(f"the RPC tracker port must be a number from 1 to 65535, got {port!r}")
        if not key:
            raise TuneError(f"the RPC device key is missing in {text!r} (HOST:PORT:KEY)")
        if not _KEY.match(key):
            raise TuneError(f"the RPC device key {key!r} may only hold letters, digits, '_', '.' and '-'")
        return RpcConfig(host, int(port), key)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}:{self.key}"

    def _ms_config(self) -> ms.runner.RPCConfig:
        return ms.runner.RPCConfig(tracker_host=self.host, tracker_port=self.port, tracker_key=self.key,
                                   session_timeout_sec=int(self.timeout_s))

    def servers(self) -> int:
        """How many servers are registered with the tracker under ``key`` (0 if none)."""
        summary = _tracker_summary(self.host, self.port, min(10.0, self.timeout_s))
        if summary is None:
            raise TuneError(f"cannot reach the RPC tracker at {self.host}:{self.port}; check it with "
                            f"python -m tvm.exec.query_rpc_tracker --host {self.host} --port {self.port}")
        keys = [str(s.get("key", "")).split(":", 1)[-1] for s in summary.get("server_info", [])]
        return keys.count(self.key)

    def check(self) -> int:
        """The number of servers under ``key``; a clear error when there are none (without this
        check a wrong key makes MetaSchedule's RPC runner wait forever)."""
        n = self.servers()
        if n == 0:
            raise TuneError(f"no RPC server is registered with key {self.key!r} at the tracker "
                            f"{self.host}:{self.port}; start one with python -m tvm.exec.rpc_server "
                            f"--tracker {self.host}:{self.port} --key {self.key}")
        return n

    def runner(self, evaluator: ms.runner.EvaluatorConfig, workers: int = 1) -> ms.runner.RPCRunner:
        """MetaSchedule's RPC runner on this tracker (its workers start in the calling process's
        environment: see ``startup.children_import_workbench``)."""
        return ms.runner.RPCRunner(rpc_config=self._ms_config(), evaluator_config=evaluator,
                                   f_create_session=_rpc_session, max_workers=max(1, workers),
                                   initializer=import_tensor_intrinsics)


def _tracker_summary(host: str, port: int, timeout_s: float) -> dict | None:
    """The tracker's summary, or None if it does not answer within ``timeout_s`` (TVM's own
    client retries for a minute, in a thread that keeps the process alive)."""
    import socket

    from tvm import rpc

    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError:
        return None
    got: dict[str, Any] = {}

    def ask() -> None:
        try:
            got["summary"] = rpc.connect_tracker(host, port).summary()
        except Exception:  # noqa: BLE001 (None means: no answer)
            pass

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    t.join(timeout_s)
    return got.get("summary")


def _rpc_session(rpc_config: ms.runner.RPCConfig) -> Any:
    """MetaSchedule's session request, with a deadline: ``TrackerSession.request`` waits
    forever for a server with the key (runs in the RPC runner's worker process)."""
    tracker = rpc_config.connect_tracker()
    got: dict[str, Any] = {}

    def request() -> None:
        try:
            got["session"] = tracker.request(key=rpc_config.tracker_key, priority=rpc_config.session_priority,
                                             session_timeout=rpc_config.session_timeout_sec)
        except Exception as e:  # noqa: BLE001 (reported below)
            got["error"] = e

    t = threading.Thread(target=request, daemon=True)
    t.start()
    t.join(rpc_config.session_timeout_sec)
    if "session" not in got:
        raise RuntimeError(f"RPC: {got['error']}" if "error" in got else
                           f"RPC: no server with key {rpc_config.tracker_key!r} became free within "
                           f"{rpc_config.session_timeout_sec} s")
    return got["session"]
