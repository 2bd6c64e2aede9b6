"""Helpers for the tooling tests: free ports in this area's range, waiting for servers, and
starting real processes (nginx, `manage.py serve`) that are always stopped again."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORT_RANGE = range(18500, 18600)  # the tooling area's ports (helpers' CONVENTIONS.md)


def free_port() -> int:
    for port in PORT_RANGE:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port left in {PORT_RANGE}")


_handed_out: set[int] = set()


def wait_for_port(port: int, *, process: subprocess.Popen | None = None, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode} before port {port} answered")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing answered on port {port} within {seconds}s")


def platform_env(**overrides: str) -> dict[str, str]:
    """The environment of a platform process started by a test: the real settings module."""
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "settings", "WEB_CONCURRENCY": "1"}
    environment.pop("APP_ENV", None)
    environment.update(overrides)
    return environment


def stop(process: subprocess.Popen, *, sig: int = signal.SIGTERM, seconds: float = 20.0) -> int:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@pytest.fixture
def start_process(tmp_path):
    """Start a process in its own session, its output in a file (`process.log`); it and its group
    are killed at the end of the test."""
    started: list[subprocess.Popen] = []

    def start(argv, **kwargs) -> subprocess.Popen:
        log = tmp_path / f"process-{len(started)}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(argv, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
        process.log = log
        started.append(process)
        return process

    yield start
    for process in started:
        stop(process)
        with contextlib.suppress(ProcessLookupError):  # the group is already gone
            os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture
def python() -> str:
    return sys.executable
