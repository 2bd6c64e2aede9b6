"""Brute-force protection of password sign-in, and sign-in while Redis is down."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from apps.identity.guard import client_ip
from tests.identity.conftest import API, PASSWORD, post, sign_in, sign_up

pytestmark = pytest.mark.django_db(databases="__all__")


def test_an_identifier_is_locked_after_repeated_failures(client, settings):
    settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER = 3
    sign_up(client, verified=True, email="target@example.com")
    for _ in range(3):
        assert sign_in(client, "target@example.com", "guess guess guess").status_code == 401
    locked = sign_in(client, "target@example.com")  # even the right password
    assert locked.status_code == 429
    assert locked.json()["code"] == "SIGN_IN_LOCKED"
    assert 0 < int(locked["Retry-After"]) <= settings.IDENTITY_SIGNIN_FAILURE_WINDOW_SECONDS
    # Another account is not affected, and unknown identifiers are counted (and locked) alike.
    sign_up(client, verified=True, email="bystander@example.com")
    assert sign_in(client, "bystander@example.com").status_code == 200
    for _ in range(3):
        sign_in(client, "ghost@example.com", "guess guess guess")
    assert sign_in(client, "ghost@example.com", "guess guess guess").json()["code"] == "SIGN_IN_LOCKED"


def test_a_success_clears_the_identifiers_count(client, settings):
    settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER = 3
    sign_up(client, verified=True, email="forgetful@example.com")
    for _ in range(2):
        sign_in(client, "forgetful@example.com", "guess guess guess")
    assert sign_in(client, "forgetful@example.com").status_code == 200
    for _ in range(2):
        sign_in(client, "forgetful@example.com", "guess guess guess")
    assert sign_in(client, "forgetful@example.com").status_code == 200


def test_one_ip_spraying_many_identifiers_is_locked(client, settings):
    settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IP = 4
    for index in range(4):
        assert sign_in(client, f"spray{index}@example.com", "guess guess guess", REMOTE_ADDR="203.0.113.7").status_code == 401
    assert sign_in(client, "spray9@example.com", "guess guess guess", REMOTE_ADDR="203.0.113.7").status_code == 429
    assert sign_in(client, "spray9@example.com", "guess guess guess", REMOTE_ADDR="203.0.113.8").status_code == 401


def test_the_client_ip_comes_from_the_gateway_only_when_it_is_trusted(settings):
    settings.TRUSTED_PROXY_IPS = ["127.0.0.1"]
    factory = RequestFactory()
    via_gateway = factory.post("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.1, 203.0.113.9")
    assert client_ip(via_gateway) == "203.0.113.9"  # the hop the gateway saw; the client may forge the rest
    direct = factory.post("/", REMOTE_ADDR="203.0.113.10", HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert client_ip(direct) == "203.0.113.10"


def test_sign_in_and_token_verification_work_while_redis_is_down(client, settings, dead_redis):
    """Spec 7: with the in-memory store gone, password sign-in and JWT verification go on, and the
    brute-force counters fall back to this process's memory instead of disappearing."""
    settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER = 2
    body = sign_up(client, verified=True, email="offline@example.com")
    signed_in = sign_in(client, "offline@example.com")
    assert signed_in.status_code == 200
    me = client.get(f"{API}/users/me", HTTP_AUTHORIZATION=f"Bearer {signed_in.json()['accessToken']}")
    assert me.status_code == 200 and me.json()["id"] == body["user"]["id"]
    for _ in range(2):
        assert sign_in(client, "offline@example.com", "guess guess guess").status_code == 401
    assert sign_in(client, "offline@example.com").status_code == 429


def test_the_current_password_check_is_guarded_like_sign_in(client, settings):
    """Guessing `currentPassword` with a stolen access token is locked like sign-in guessing (it
    was unlimited)."""
    settings.IDENTITY_SIGNIN_MAX_FAILURES_PER_IDENTIFIER = 3
    body = sign_up(client, email="changer@example.com")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {body['accessToken']}"}
    for _ in range(3):
        wrong = post(
            client, "/users/me/password", {"currentPassword": "guess guess guess", "newPassword": "a new long password"}, **headers
        )
        assert wrong.status_code == 400 and wrong.json()["code"] == "CURRENT_PASSWORD_WRONG"
    locked = post(client, "/users/me/password", {"currentPassword": PASSWORD, "newPassword": "a new long password"}, **headers)
    assert locked.status_code == 429 and locked.json()["code"] == "SIGN_IN_LOCKED"
    assert 0 < int(locked["Retry-After"]) <= settings.IDENTITY_SIGNIN_FAILURE_WINDOW_SECONDS
    # The password did not change, and another account is not affected.
    other = sign_up(client, email="other-changer@example.com")
    changed = post(
        client,
        "/users/me/password",
        {"currentPassword": PASSWORD, "newPassword": "a new long password"},
        HTTP_AUTHORIZATION=f"Bearer {other['accessToken']}",
    )
    assert changed.status_code == 200
