"""The shell side: scripts parse, the helpers read URLs right, and CI runs scripts/test."""

from __future__ import annotations

import subprocess

import pytest

from tests.tooling.conftest import ROOT

SCRIPTS = [ROOT / "scripts" / "run", ROOT / "scripts" / "test", ROOT / ".ci" / "run", *sorted((ROOT / "scripts" / "lib").glob("*.sh"))]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_script_parses(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def bash(snippet: str) -> str:
    result = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source scripts/lib/prepare.sh; {snippet}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize(
    ("url", "default_port", "expected"),
    [
        ("postgres://postgres@127.0.0.1:5432/merchant_platform", 5432, "127.0.0.1 5432"),
        ("postgres://user:secret@db.internal/merchant_platform?sslmode=require", 5432, "db.internal 5432"),
        ("redis://127.0.0.1:6379/7", 6379, "127.0.0.1 6379"),
        ("redis://:password@[::1]:6380/0", 6379, "::1 6380"),
        ("http://127.0.0.1:8333", 80, "127.0.0.1 8333"),
    ],
)
def test_url_host_port(url, default_port, expected):
    assert bash(f"url_host_port '{url}' {default_port}") == expected


def test_maintenance_url_and_database_name():
    url = "postgres://postgres@127.0.0.1:5432/merchant_platform?connect_timeout=5"
    assert bash(f"maintenance_url '{url}'") == "postgres://postgres@127.0.0.1:5432/postgres"
    assert bash(f"database_name '{url}'") == "merchant_platform"


def test_ci_runs_scripts_test_and_nothing_else():
    commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert commands[-1] == "exec bash scripts/test"
