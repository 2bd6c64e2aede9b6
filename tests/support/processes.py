"""Subprocesses of the project (manage.py, celery, uvicorn) against the test database, each in its
own process group and always stopped again. A pytest plugin (tests/conftest.py loads it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Variables a subprocess must not inherit: it states its own topology and ids.
PROCESS_SPECIFIC = ("APP_SERVICE", "APP_ENV", "APP_ENV_NODE_ID", "APP_ENV_SNOWFLAKE_WORKER_ID", "DJANGO_SETTINGS_MODULE", "RUN_MODE")


def inherited_env(**overrides: str) -> dict[str, str]:
    """This run's environment (Redis, broker, prefixes...) without what a process states for itself
    (its topology and ids, and each service's own database URL), plus `overrides`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in PROCESS_SPECIFIC and not (key.endswith("_DATABASE_URL") and key != "DATABASE_URL")
    }
    env.update(overrides)
    return env


def database_url_of_tests() -> str:
    settings = connection.settings_dict
    return f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"


def child_environment(**overrides: str) -> dict[str, str]:
    """The environment of a process running the test settings against the test database, plus
    `overrides` (which may name other settings or another database)."""
    return inherited_env(
        **{"DJANGO_SETTINGS_MODULE": "settings.test", "DATABASE_URL": database_url_of_tests(), "PYTHONUNBUFFERED": "1", **overrides}
    )


@pytest.fixture
def test_database_url() -> str:
    return database_url_of_tests()


@pytest.fixture
def subprocess_env():
    """`build(**overrides)`: the environment of a subprocess of this test (child_environment)."""
    return child_environment


class Process:
    """A child in its own process group, its output collected in a file."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path):
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.popen = subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: int, *, group: bool = False) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.popen.pid, signum)
            else:
                self.popen.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.signal(signal.SIGTERM, group=True)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL, group=True)
                self.popen.wait(timeout=10)
        self.signal(signal.SIGKILL, group=True)  # leftovers of the group (pool children)
        self._log.close()


@pytest.fixture
def spawn(tmp_path, subprocess_env):
    """Start `python <args>` (manage.py, -m celery, -m uvicorn); stopped at the end of the test."""
    started: list[Process] = []

    def start(*args: str, env: dict[str, str] | None = None, name: str = "process") -> Process:
        process = Process([sys.executable, *args], env or subprocess_env(), tmp_path / f"{name}-{len(started)}.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
