"""Helpers for the tooling tests: free ports in this area's range, waiting for servers, and
starting real processes (nginx, `manage.py serve`) that are always stopped again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORTS = range(18500, 18600)  # the tooling area's servers (nginx, `manage.py serve`)


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
