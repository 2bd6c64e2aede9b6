"""The admin's sign-in (all-in-one operators) under identity's sign-in guard, and the admin's
cookies outside development."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.kernel.conftest import manage_command, run_all
from tests.kernel.test_commands import PRODUCTION_SECRETS

PASSWORD = "operator-password-123"
pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture
def operator():
    return get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)


def admin_sign_in(client: Client, username: str, password: str, **extra):
    client.get("/admin/login/", **extra)
    token = client.cookies["csrftoken"].value
    body = {"username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/admin/"}
    return client.post("/admin/login/", body, **extra)


def test_the_admin_login_locks_an_operator_after_too_many_wrong_passwords(operator, settings):
    settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER = 3
    client = Client(enforce_csrf_checks=True)
    for _ in range(3):
        wrong = admin_sign_in(client, "operator", "not the password at all")
        assert wrong.status_code == 200 and "sessionid" not in wrong.cookies
    locked = admin_sign_in(client, "Operator", PASSWORD)  # the right password, while locked
    assert locked.status_code == 200 and "sessionid" not in locked.cookies
    assert b"Too many failed sign-in attempts" in locked.content

    other = get_user_model().objects.create_superuser("second", "second@example.com", PASSWORD)
    fine = admin_sign_in(Client(enforce_csrf_checks=True), other.username, PASSWORD)
    assert fine.status_code == 302 and "sessionid" in fine.cookies  # the lock is the operator's, not everyone's


def test_the_admin_login_locks_an_address_that_tries_many_operators(operator, settings):
    settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IP = 3
    client = Client(enforce_csrf_checks=True)
    for name in ("alice", "bob", "carol"):
        assert "sessionid" not in admin_sign_in(client, name, "guess-guess-guess").cookies
    locked = admin_sign_in(client, "operator", PASSWORD)
    assert "sessionid" not in locked.cookies and b"Too many failed sign-in attempts" in locked.content
    elsewhere = admin_sign_in(Client(enforce_csrf_checks=True), "operator", PASSWORD, REMOTE_ADDR="192.0.2.10")
    assert elsewhere.status_code == 302


def test_a_successful_admin_sign_in_clears_the_operators_failures(operator, settings):
    settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER = 3
    client = Client(enforce_csrf_checks=True)
    for _ in range(2):
        admin_sign_in(client, "operator", "not the password at all")
    assert admin_sign_in(client, "operator", PASSWORD).status_code == 302
    client.logout()
    for _ in range(2):
        admin_sign_in(client, "operator", "not the password at all")
    assert admin_sign_in(client, "operator", PASSWORD).status_code == 302


def test_outside_development_the_admin_cookies_are_secure_httponly_and_same_site():
    secrets = {name: f"test-value-for-{name.lower()}-0123456789abcdef0123456789abcdef" for name in PRODUCTION_SECRETS}
    names = ("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY", "SESSION_COOKIE_SAMESITE", "CSRF_COOKIE_SAMESITE")
    script = f"import json; from django.conf import settings; print(json.dumps({{n: getattr(settings, n) for n in {names!r}}}))"
    production, development = run_all(
        (manage_command("shell", "-c", script), {"APP_ENV": "production", "PAYMENT_MODE": "API", **secrets}),
        (manage_command("shell", "-c", script), {"APP_ENV": "development"}),
    )
    assert production.returncode == 0, production.stderr
    assert json.loads(production.stdout.strip().splitlines()[-1]) == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Strict",
        "CSRF_COOKIE_SAMESITE": "Strict",
    }
    assert development.returncode == 0, development.stderr
    local = json.loads(development.stdout.strip().splitlines()[-1])
    assert local["SESSION_COOKIE_SECURE"] is False and local["SESSION_COOKIE_SAMESITE"] == "Strict"  # plain HTTP on this machine
