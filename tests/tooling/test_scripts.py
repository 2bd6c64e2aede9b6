"""The shell side: scripts parse, the helpers read URLs right, and CI runs scripts/test."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from merchant_platform import licenses
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


def ensure_dev_credentials(directory, **env: str) -> subprocess.CompletedProcess:
    """Run prepare.sh's ensure_dev_credentials with DEV_CREDENTIALS_DIR=`directory` and `env` over
    this run's environment (APP_ENV and the credentials themselves removed)."""
    names = (
        "APP_ENV",
        "DJANGO_SETTINGS_MODULE",
        *DEV_SECRETS,
        "APP_ENV_LICENSING_ED25519_PRIVATE_KEY",
        "APP_ENV_LICENSING_ED25519_PUBLIC_KEY",
    )
    base = {key: value for key, value in os.environ.items() if key not in names}
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail; source scripts/lib/prepare.sh; ensure_dev_credentials"],
        cwd=ROOT,
        env={**base, "DEV_CREDENTIALS_DIR": str(directory), **env},
        capture_output=True,
        text=True,
        check=False,
    )


DEV_SECRETS = (
    "DJANGO_SECRET_KEY",
    "APP_ENV_APPLICATION_SECRET",
    "SERVICE_BASIC_AUTH_PASSWORD_COMMERCE",
    "SERVICE_BASIC_AUTH_PASSWORD_PAYMENT",
    "SERVICE_BASIC_AUTH_PASSWORD_LEDGER",
    "SERVICE_BASIC_AUTH_PASSWORD_TAXATION",
    "SERVICE_BASIC_AUTH_PASSWORD_FINANCE",
    "SERVICE_BASIC_AUTH_PASSWORD_INVENTORY",
    "SERVICE_BASIC_AUTH_PASSWORD_LICENSING",
    "SERVICE_BASIC_AUTH_PASSWORD_OUTREACH",
)


def test_the_scripts_make_random_development_credentials_once(tmp_path):
    """scripts/run and scripts/test (issue 22 item 4): random secrets and a licensing key pair, 0600."""
    assert "ensure_dev_credentials" in (ROOT / "scripts" / "run").read_text()
    assert "ensure_dev_credentials" in (ROOT / "scripts" / "test").read_text()
    first, second = tmp_path / "one", tmp_path / "two"
    assert ensure_dev_credentials(first).returncode == 0
    files = [first / "secrets" / name for name in DEV_SECRETS] + [first / "licensing-ed25519.pem"]
    values = [path.read_text() for path in files]
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in files)
    assert all(len(value) >= 64 for value in values[:-1]) and len(set(values)) == len(values)
    licenses.load_private_key(values[-1])
    assert ensure_dev_credentials(first).returncode == 0
    assert [path.read_text() for path in files] == values  # the same on every run
    assert ensure_dev_credentials(second).returncode == 0
    assert not {path.read_text() for path in second.rglob("*") if path.is_file()} & set(values)  # no two machines share one


@pytest.mark.parametrize("app_env", ["production", "staging", "test"])
def test_no_development_credentials_outside_development(tmp_path, app_env):
    result = ensure_dev_credentials(tmp_path / "dev", APP_ENV=app_env)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "dev").exists()
