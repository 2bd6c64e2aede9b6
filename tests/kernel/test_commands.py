"""Items 2, 11 and 13: production refuses to start without its secrets; seeding twice changes
nothing (RUN_MODE=migrate: test_database.py); the admin answers and create_operator creates, then
updates."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connections

from merchant_platform.registry import active_services
from tests.kernel.conftest import manage_command, row_digest_query, run_all

# In the order settings read them (all-in-one mode: object storage is in use).
PRODUCTION_SECRETS = (
    "DJANGO_SECRET_KEY",
    "S3_SECRET_ACCESS_KEY",
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


def _refusal(result) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_production_without_a_secret_refuses_to_start_naming_it():
    values = {name: f"test-value-for-{name.lower()}-0123456789abcdef0123456789abcdef" for name in PRODUCTION_SECRETS}
    # Secret i missing (the ones before it set), then all of them set; an all-in-one process runs
    # payment, which production runs in API or WORKER mode only (tests/payment/test_modes.py).
    production = {"APP_ENV": "production", "PAYMENT_MODE": "API"}
    environments = [{**production, **dict(list(values.items())[:index])} for index in range(len(values) + 1)]
    # A split process whose service uses no object storage needs no storage key.
    without_storage = {"APP_ENV": "production", "APP_SERVICE": "outreach", **values}
    del without_storage["S3_SECRET_ACCESS_KEY"]
    # Licensing alone needs no application secret: it warns and skips certificate publication (spec 7).
    licensing_without_secret = {**without_storage, "APP_SERVICE": "licensing"}
    del licensing_without_secret["APP_ENV_APPLICATION_SECRET"]
    outreach_without_secret = {**without_storage}
    del outreach_without_secret["APP_ENV_APPLICATION_SECRET"]
    checks = [*environments, without_storage, licensing_without_secret, outreach_without_secret]
    *refused, accepted, accepted_split, accepted_licensing, refused_outreach = run_all(*((manage_command("check"), env) for env in checks))
    for name, result in zip(PRODUCTION_SECRETS, refused, strict=True):
        only_local = "(only development and test make their own)"
        assert _refusal(result) == f"merchant-platform: {name} must be set when APP_ENV=production {only_local}; refusing to start"
    assert accepted.returncode == 0, accepted.stderr
    assert accepted_split.returncode == 0, accepted_split.stderr
    assert accepted_licensing.returncode == 0, accepted_licensing.stderr
    assert "APP_ENV_APPLICATION_SECRET must be set" in _refusal(refused_outreach)


def _content_digest() -> dict[str, str]:
    """A digest of every row each alias can see (updated_at aside): what a seed run could change."""
    digests = {}
    for alias, schema in [("default", "public"), *((s.db_alias, s.schema) for s in active_services())]:
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = 'BASE TABLE'", [schema]
            )
            for (table,) in cursor.fetchall():
                cursor.execute(row_digest_query(schema, table))
                count, digest = cursor.fetchone()
                digests[f"{schema}.{table}"] = f"{count}:{digest}"
    return digests


@pytest.mark.django_db(databases="__all__")
def test_seed_twice_changes_nothing(capsys):
    call_command("seed")
    after_first = _content_digest()
    call_command("seed")
    assert _content_digest() == after_first
    assert capsys.readouterr().out.count("seeded:") == 2


def test_admin_login_page_answers_in_all_in_one_mode(client):
    response = client.get("/admin/login/")
    assert response.status_code == 200
    assert b'name="password"' in response.content
    assert client.get("/admin/")["Location"].startswith("/admin/login/")


@pytest.mark.django_db(databases="__all__")
def test_create_operator_creates_then_updates(monkeypatch, client, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed, not strength, here
    monkeypatch.setenv("OPERATOR_PASSWORD", "first-password-123")
    call_command("create_operator", "--username", "ops", "--email", "ops@example.com")
    monkeypatch.setenv("OPERATOR_PASSWORD", "second-password-456")
    call_command("create_operator", "--username", "ops")

    (operator,) = get_user_model().objects.filter(username="ops")
    assert operator.is_staff and operator.is_superuser and operator.is_active
    assert operator.email == "ops@example.com"
    assert operator.check_password("second-password-456") and not operator.check_password("first-password-123")
    assert client.login(username="ops", password="second-password-456")
    assert client.get("/admin/").status_code == 200


@pytest.mark.django_db(databases="__all__")
def test_create_operator_refuses_a_weak_password(monkeypatch):
    monkeypatch.setenv("OPERATOR_PASSWORD", "short")
    with pytest.raises(CommandError, match="OPERATOR_PASSWORD"):
        call_command("create_operator")
    assert not get_user_model().objects.exists()
