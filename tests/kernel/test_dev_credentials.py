"""Issue 22 item 4 and issue 24 item 10: no well-known credentials. Development makes random ones
once in var/dev/ (DEV_CREDENTIALS_DIR) and every command reads them from there; only the test
settings hold fixed values; any other APP_ENV refuses to start without real ones."""

from __future__ import annotations

import json
import stat

from django.conf import settings

from tests.kernel.conftest import manage_command, python_command, run_all

# The subprocesses inherit this run's environment (tests/kernel/conftest.py), which names no
# credential: scripts/test exports none.

SHOW_SETTINGS = """
import json, django
django.setup()
from django.conf import settings as s
print(json.dumps({name: getattr(s, name) for name in (
    "SECRET_KEY", "APP_ENV_APPLICATION_SECRET", "SERVICE_BASIC_AUTH_ACCOUNTS", "SERVICE_BASIC_AUTH_CREDENTIALS", "ALLOWED_HOSTS",
    "APP_ENV_LICENSING_ED25519_PRIVATE_KEY",
    "APP_ENV_LICENSING_ED25519_PUBLIC_KEY")}))
"""


def _settings_in(*directories) -> list[dict]:
    results = run_all(*((python_command(SHOW_SETTINGS), {"DEV_CREDENTIALS_DIR": str(d)}) for d in directories))
    for result in results:
        assert result.returncode == 0, result.stderr
    return [json.loads(result.stdout.strip().splitlines()[-1]) for result in results]


def test_development_makes_random_credentials_once_and_every_process_agrees(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    # Three processes starting together on a fresh directory, one on another directory.
    first, *together, elsewhere = _settings_in(one, one, one, two)
    assert all(values == first for values in together)
    assert _settings_in(one) == [first]  # the same on the next run
    for name in ("SECRET_KEY", "APP_ENV_APPLICATION_SECRET"):
        assert len(first[name]) >= 64 and "dev-only" not in first[name]
        assert first[name] != elsewhere[name]
    # One random account per calling service, presented with the same passwords.
    accounts = first["SERVICE_BASIC_AUTH_ACCOUNTS"]
    callers = {"commerce", "payment", "ledger", "taxation", "finance", "inventory", "licensing", "outreach"}
    assert set(accounts) == callers and first["SERVICE_BASIC_AUTH_CREDENTIALS"] == accounts
    assert len(set(accounts.values())) == len(callers) and all(len(password) >= 64 for password in accounts.values())
    assert not set(accounts.values()) & set(elsewhere["SERVICE_BASIC_AUTH_ACCOUNTS"].values())
    assert "*" not in first["ALLOWED_HOSTS"]
    assert first["APP_ENV_LICENSING_ED25519_PRIVATE_KEY"].startswith("-----BEGIN PRIVATE KEY-----")
    assert first["APP_ENV_LICENSING_ED25519_PUBLIC_KEY"] != elsewhere["APP_ENV_LICENSING_ED25519_PUBLIC_KEY"]
    files = [path for path in one.rglob("*") if path.is_file()]
    # Django's secret key, the application secret, the service accounts' passwords, the fake
    # provider's secret (payment, development only) and licensing's key pair.
    assert len(files) == 4 + len(callers) and all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in files)


def test_environment_values_win_over_the_development_ones(tmp_path):
    given = {"DJANGO_SECRET_KEY": "a-real-secret-key-" + "x" * 40, "SERVICE_BASIC_AUTH_ACCOUNTS": "billing=pw"}
    [result] = run_all((python_command(SHOW_SETTINGS), {**given, "DEV_CREDENTIALS_DIR": str(tmp_path)}))
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values["SECRET_KEY"] == given["DJANGO_SECRET_KEY"]
    assert values["SERVICE_BASIC_AUTH_ACCOUNTS"] == {"billing": "pw"}
    assert not (tmp_path / "secrets" / "DJANGO_SECRET_KEY").exists()


def test_every_command_finds_the_development_licensing_keys(tmp_path):
    """Issue 24 item 10: `manage.py check` outside scripts/run no longer warns certificates_disabled."""
    [result] = run_all((manage_command("check"), {"DEV_CREDENTIALS_DIR": str(tmp_path)}))
    assert result.returncode == 0, result.stderr
    assert "certificates_disabled" not in result.stdout + result.stderr
    assert (tmp_path / "licensing-ed25519.pem").exists()


def test_outside_development_and_test_a_missing_credential_stops_the_process(tmp_path):
    [staging, typo] = run_all(
        *((manage_command("check"), {"APP_ENV": env, "DEV_CREDENTIALS_DIR": str(tmp_path)}) for env in ("staging", "prod"))
    )
    for result, env in ((staging, "staging"), (typo, "prod")):
        assert result.returncode != 0
        only_local = "(only development and test make their own)"
        assert result.stderr.strip().splitlines() == [
            f"merchant-platform: DJANGO_SECRET_KEY must be set when APP_ENV={env} {only_local}; refusing to start"
        ]
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_the_test_settings_hold_the_only_fixed_credentials():
    assert all(password.startswith("test-only-") for password in settings.SERVICE_BASIC_AUTH_ACCOUNTS.values())
    assert settings.SECRET_KEY.startswith("test-only-")
    assert "dev-only" not in "".join(
        (settings.SECRET_KEY, settings.APP_ENV_APPLICATION_SECRET, *settings.SERVICE_BASIC_AUTH_ACCOUNTS.values())
    )
