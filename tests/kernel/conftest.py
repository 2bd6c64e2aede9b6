"""Fixtures of the kernel tests: subprocesses at the project root, the test database's URL, and the
test-only URLs (tests.kernel.urls)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import connections

from tests.support.processes import PROJECT_ROOT, inherited_env


def python_command(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def manage_command(*args: str) -> list[str]:
    return [sys.executable, "manage.py", *args]


def start_at_root(argv: list[str], env: dict[str, str], *, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    """`argv` at the project root with this run's environment plus `env` (settings: the real
    `settings` module), its output read as text through pipes."""
    return subprocess.Popen(
        argv,
        cwd=PROJECT_ROOT,
        env=inherited_env(**{"DJANGO_SETTINGS_MODULE": "settings", **env}),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_all(*commands: tuple[list[str], dict[str, str]], timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """Run (argv, env overrides) commands at the project root, concurrently; results in order."""
    processes = [start_at_root(argv, env) for argv, env in commands]
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


@pytest.fixture
def kernel_urls(settings):
    """Route through tests.kernel.urls: the platform's routes plus the test-only views."""
    settings.ROOT_URLCONF = "tests.kernel.urls"
