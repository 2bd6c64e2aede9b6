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


def dev_license_keys(key_file, **env: str) -> list[str]:
    """Run ensure_dev_license_keys with `env` over this run's environment without the licensing keys;
    returns the two exported values (empty when it exported nothing)."""
    names = ("APP_ENV_LICENSING_ED25519_PRIVATE_KEY", "APP_ENV_LICENSING_ED25519_PUBLIC_KEY", "APP_ENV")
    base = {key: value for key, value in os.environ.items() if key not in names}
    result = subprocess.run(
        [
            "bash",
            "-c",
            'set -euo pipefail; source scripts/lib/prepare.sh; ensure_dev_license_keys "$1"; '
            'printf "%s\\n%s\\n" "${APP_ENV_LICENSING_ED25519_PRIVATE_KEY:-}" "${APP_ENV_LICENSING_ED25519_PUBLIC_KEY:-}"',
            "bash",
            str(key_file),
        ],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\n")[:2]


def test_run_makes_a_development_license_key_pair_once(tmp_path):
    key_file = tmp_path / "dev" / "licensing-ed25519.pem"
    private, public = dev_license_keys(key_file)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    private_key = licenses.load_private_key(private.replace("\\n", "\n"))
    public_key = licenses.load_public_key(public.replace("\\n", "\n"))
    assert public_key.public_bytes_raw() == private_key.public_key().public_bytes_raw()
    assert dev_license_keys(key_file) == [private, public]  # the same pair on every run


@pytest.mark.parametrize(
    "env",
    [{"APP_ENV": "production"}, {"APP_ENV_LICENSING_ED25519_PRIVATE_KEY": "set"}, {"APP_ENV_LICENSING_ED25519_PUBLIC_KEY": "set"}],
    ids=["production", "private key given", "public key given"],
)
def test_no_development_license_keys_where_the_environment_decides(tmp_path, env):
    key_file = tmp_path / "licensing-ed25519.pem"
    exported = dev_license_keys(key_file, **env)
    assert not key_file.exists()
    assert exported == [env.get("APP_ENV_LICENSING_ED25519_PRIVATE_KEY", ""), env.get("APP_ENV_LICENSING_ED25519_PUBLIC_KEY", "")]
