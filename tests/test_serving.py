"""Safe to serve: ``make run`` listens on this machine only (settings in .streamlit/config.toml)."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = {"127.0.0.1", "::1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_command(port: int) -> list[str]:
    """The command line ``make run PORT=port`` runs (without its venv step, which may install)."""
    out = subprocess.run(["make", "-n", "-s", "--no-print-directory", "run", f"PORT={port}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if "-m workbench.app" in ln]
    return shlex.split(line)


def _listening(pid: int, port: int) -> set[str]:
    """The local addresses on which the process (or a child) listens on ``port``."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return {c.laddr.ip for p in procs for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


@pytest.mark.slow
def test_make_run_listens_on_loopback_only(tmp_path):
    port = _free_port()
    cmd = _run_command(port)
    assert cmd[1:3] == ["-m", "workbench.app"] and "--server.address" not in cmd
    env = {**os.environ, "ALT_WORKBENCH_WORK": str(tmp_path / "work"),
           "ALT_WORKBENCH_SESSIONS": str(tmp_path / "sessions")}
    with open(tmp_path / "streamlit.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        end, addresses = time.monotonic() + 90, set()
        while not addresses:
            assert proc.poll() is None, (tmp_path / "streamlit.log").read_text()
            assert time.monotonic() < end, "not listening within 90 s: " + (tmp_path / "streamlit.log").read_text()
            time.sleep(0.3)
            addresses = _listening(proc.pid, port)
        assert addresses <= LOOPBACK, addresses  # never 0.0.0.0 or ::
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=10) as r:
            assert r.status == 200
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


def test_the_streamlit_config_limits_uploads_and_hides_the_deploy_button():
    import tomllib

    from workbench.engine.session.session import MAX_SESSION_MB

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1" and config["server"]["headless"] is True
    assert config["server"]["maxUploadSize"] == MAX_SESSION_MB
    assert config["browser"]["gatherUsageStats"] is False and config["client"]["toolbarMode"] == "minimal"
