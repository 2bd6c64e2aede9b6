"""Fixtures of the kernel tests: subprocesses with a clean environment, captured log lines, closed
ports, small HTTP servers standing in for another service, and the test-only URLs (tests.kernel.urls)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.db import connections

from merchant_platform.logging import flush_request_lines, key_value_formatter

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# Variables a subprocess must not inherit from the test run: it states its own topology and ids.
_PROCESS_SPECIFIC = ("APP_SERVICE", "APP_ENV", "APP_ENV_NODE_ID", "APP_ENV_SNOWFLAKE_WORKER_ID", "DJANGO_SETTINGS_MODULE", "RUN_MODE")


def subprocess_env(**overrides: str) -> dict[str, str]:
    """This run's environment (database, Redis...) without process-specific variables, plus overrides."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _PROCESS_SPECIFIC and not (key.endswith("_DATABASE_URL") and key != "DATABASE_URL")
    }
    env["DJANGO_SETTINGS_MODULE"] = "settings"
    env.update(overrides)
    return env


def python_command(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def manage_command(*args: str) -> list[str]:
    return [sys.executable, "manage.py", *args]


def run_all(*commands: tuple[list[str], dict[str, str]], timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """Run (argv, env overrides) commands at the project root, concurrently; results in order."""
    processes = [
        subprocess.Popen(
            argv,
            cwd=PROJECT_ROOT,
            env=subprocess_env(**env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv, env in commands
    ]
    results = []
    for (argv, _), process in zip(commands, processes, strict=True):
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
        results.append(subprocess.CompletedProcess(argv, process.returncode, stdout, stderr))
    return results


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter at the project root (settings: the real `settings` module)."""
    return run_all((python_command(code), env))[0]


class JsonHandler(BaseHTTPRequestHandler):
    """A stand-in server's handler: `answer(path)` says (status, JSON body); no access log."""

    def answer(self, path: str) -> tuple[int, object]:
        raise NotImplementedError

    def do_GET(self):
        status, payload = self.answer(self.path)
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        """Keep the test output quiet: no access log lines."""


@contextlib.contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on a free loopback port, answering with `handler`; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(name: str | None = None) -> str:
    """A URL to the server of `default`: its (test) database, or another database `name` there."""
    config = connections["default"].settings_dict
    credentials = config["USER"] + (f":{config['PASSWORD']}" if config["PASSWORD"] else "")
    return f"postgres://{credentials}@{config['HOST']}:{config['PORT']}/{name or config['NAME']}"


@pytest.fixture
def test_database_env(django_db_setup) -> dict[str, str]:
    """Environment for a subprocess that should use the (already migrated) test database."""
    return {"DATABASE_URL": database_url(), "DB_POOL": "false"}


def row_digest_query(schema: str, table: str) -> str:
    """SQL answering (row count, md5 of every row as JSON without updated_at) for one table: what a
    re-run of an idempotent command must leave unchanged."""
    return (
        "SELECT count(*), md5(coalesce(string_agg(r, '|' ORDER BY r), '')) "
        f'FROM (SELECT (to_jsonb(t) - \'updated_at\')::text AS r FROM "{schema}"."{table}" t) rows'
    )


class LogCapture:
    """Lines rendered by the platform's key=value formatter, as they would reach stdout, plus what
    was printed to stdout directly (the request lines: merchant_platform.logging.RequestLogger)."""

    def __init__(self, capsys):
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(key_value_formatter())
        self.capsys = capsys
        self.printed: list[str] = []

    @property
    def lines(self) -> list[str]:
        flush_request_lines()
        self.printed += self.capsys.readouterr().out.splitlines()
        return self.stream.getvalue().splitlines() + self.printed

    def matching(self, *fragments: str) -> list[str]:
        return [line for line in self.lines if all(fragment in line for fragment in fragments)]


@pytest.fixture
def log_lines(capsys):
    capture = LogCapture(capsys)
    root = logging.getLogger()
    root.addHandler(capture.handler)
    try:
        yield capture
    finally:
        root.removeHandler(capture.handler)


@pytest.fixture
def kernel_urls(settings):
    """Route through tests.kernel.urls: the platform's routes plus the test-only views."""
    settings.ROOT_URLCONF = "tests.kernel.urls"
