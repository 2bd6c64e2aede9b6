"""A password change, a reset and a deactivation end every session at once: refresh tokens are
revoked, and access tokens issued before the change are refused by every verifier
(merchant_platform.revocation), also when a refresh runs at the same moment."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time

import pytest
from django.db import connections
from django.utils import timezone
from django_redis import get_redis_connection

from apps.identity import passwords, services
from apps.identity.models import User
from merchant_platform import crypto, revocation
from merchant_platform.verification.tokens import TokenRejected, verify_access_token
from tests.identity.conftest import API, PASSWORD, post, sign_in, sign_up

pytestmark = pytest.mark.django_db(databases="__all__")
NEW_PASSWORD = "a different long password"


def me(client, access_token: str):
    return client.get(f"{API}/users/me", HTTP_AUTHORIZATION=f"Bearer {access_token}")


def assert_revoked(access_token: str) -> None:
    with pytest.raises(TokenRejected) as caught:
        verify_access_token(access_token)
    assert caught.value.code == "TOKEN_REVOKED"


def test_a_password_change_refuses_earlier_access_tokens_at_once(client):
    """Access tokens of every session, including one this process has already verified and
    remembers, stop working when the password changes (they worked until `exp`)."""
    body = sign_up(client, verified=True, email="rotate-pw@example.com")
    other = sign_in(client, "rotate-pw@example.com").json()
    assert me(client, body["accessToken"]).status_code == 200  # verified once, remembered
    changed = post(
        client,
        "/users/me/password",
        {"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD},
        HTTP_AUTHORIZATION=f"Bearer {body['accessToken']}",
    )
    assert changed.status_code == 200
    for token in (body["accessToken"], other["accessToken"]):
        refused = me(client, token)
        assert refused.status_code == 401 and refused.json()["code"] == "TOKEN_REVOKED"
    assert me(client, changed.json()["accessToken"]).status_code == 200
    assert me(client, sign_in(client, "rotate-pw@example.com", NEW_PASSWORD).json()["accessToken"]).status_code == 200


def test_deactivation_refuses_every_token_at_once(client):
    body = sign_up(client, verified=True, email="leaver@example.com")
    user_id = int(body["user"]["id"])
    verify_access_token(body["accessToken"])
    services.user_deactivate(user_id=user_id)
    assert_revoked(body["accessToken"])
    assert post(client, "/auth/refresh", {"refreshToken": body["refreshToken"]}).status_code == 401
    assert sign_in(client, "leaver@example.com").status_code == 401
    services.user_reactivate(user_id=user_id)
    assert_revoked(body["accessToken"])  # old tokens stay refused
    assert verify_access_token(sign_in(client, "leaver@example.com").json()["accessToken"]).id == user_id


def test_the_instant_holds_when_the_redis_copy_is_lost_or_forged(client):
    body = sign_up(client, verified=True, email="forged@example.com")
    user_id = int(body["user"]["id"])
    services.user_deactivate(user_id=user_id)
    redis = get_redis_connection("default")
    revocation.local_copies.clear()  # as another process, which reads Redis
    redis.delete(revocation._key(user_id))
    assert_revoked(body["accessToken"])  # read again from PostgreSQL
    revocation.local_copies.clear()
    redis.set(revocation._key(user_id), "none.0000")  # "no instant", without a valid HMAC
    assert_revoked(body["accessToken"])


def test_without_an_application_secret_the_redis_copy_is_not_trusted(client, settings):
    """Without a secret no copy can be authenticated, so none is trusted."""
    body = sign_up(client, verified=True, email="secretless@example.com")
    user_id = int(body["user"]["id"])
    services.user_deactivate(user_id=user_id)
    settings.APP_ENV_APPLICATION_SECRET = ""
    # What anyone can compute: "no instant" under the key an empty secret derives.
    key = crypto._derive_key("", f"mac:{revocation._MAC_PURPOSE}")
    tag = base64.urlsafe_b64encode(hmac.new(key, f"{user_id}:none".encode(), hashlib.sha256).digest()).decode().rstrip("=")
    get_redis_connection("default").set(revocation._key(user_id), f"none.{tag}")
    revocation.local_copies.clear()  # as another process, which reads Redis
    assert_revoked(body["accessToken"])


def test_the_instant_is_read_from_postgresql_while_redis_is_down(client, dead_redis):
    user = User.objects.create(email="offline-rev@example.com", password_hash="unused", email_verified_at=timezone.now())
    old = services._issue_pair(user).access_token
    services.user_deactivate(user_id=user.pk)
    assert_revoked(old)
    revocation.local_copies.clear()  # as another process, which reads PostgreSQL
    assert_revoked(old)


# --- Races with a refresh in flight (real transactions, two threads) -------------------------------


def _race(monkeypatch, revoke) -> tuple[services.TokenPair | None, User]:
    """A refresh that is slow to issue its pair (as on a busy server) while `revoke(user, token)`
    runs from another thread a moment later; returns the refresh's pair (None if refused)."""
    user = User.objects.create(email="racer@example.com", password_hash=passwords.hash_password(PASSWORD), email_verified_at=timezone.now())
    first = services._issue_pair(user)
    original = services._issue_pair
    issuing = threading.Event()  # the refresh holds its token's lock and is issuing its pair

    def slow_issue(user, *, family=None):
        if family is not None:  # the refresh's rotation, not the password change's new pair
            issuing.set()
            time.sleep(0.4)
        return original(user, family=family)

    monkeypatch.setattr(services, "_issue_pair", slow_issue)
    refreshed = []

    def refresh():
        try:
            refreshed.append(services.token_refresh(refresh_token=first.refresh_token))
        except services.RefreshTokenInvalid:
            refreshed.append(None)
        finally:
            connections.close_all()

    def revoke_later():
        issuing.wait(timeout=30)  # an event, not a sleep: on a loaded machine the refresh may start late
        try:
            revoke(user, first.refresh_token)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=refresh), threading.Thread(target=revoke_later)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.setattr(services, "_issue_pair", original)
    return refreshed[0], user


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_refresh_racing_a_password_change_does_not_survive_it(monkeypatch):
    """The refresh had locked its token when the password changed; it used to commit its new
    refresh token after the revoking UPDATE had looked, so that token kept working."""
    changed = []
    pair, user = _race(
        monkeypatch,
        lambda user, _: changed.append(
            services.user_change_password(user=User.objects.get(pk=user.pk), current_password=PASSWORD, new_password=NEW_PASSWORD, ip="::1")
        ),
    )
    assert pair is not None  # the refresh went first
    with pytest.raises(services.RefreshTokenInvalid):
        services.token_refresh(refresh_token=pair.refresh_token)
    assert_revoked(pair.access_token)
    assert verify_access_token(changed[0].access_token).id == user.pk
    assert services.token_refresh(refresh_token=changed[0].refresh_token).user.pk == user.pk


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_refresh_racing_a_sign_out_does_not_survive_it(monkeypatch):
    pair, _ = _race(monkeypatch, lambda user, token: services.session_sign_out(refresh_token=token))
    assert pair is not None
    with pytest.raises(services.RefreshTokenInvalid):
        services.token_refresh(refresh_token=pair.refresh_token)


def test_the_admin_deactivates_through_the_service(client, admin_client):
    """The admin's form edited `is_active` directly, and the account's tokens kept working."""
    body = sign_up(client, verified=True, email="admin-target@example.com")
    user_id = int(body["user"]["id"])
    assert admin_client.get(f"/admin/identity/user/{user_id}/change/").status_code == 200
    assert admin_client.post(f"/admin/identity/user/{user_id}/change/", {"is_active": ""}).status_code == 403
    response = admin_client.post("/admin/identity/user/", {"action": "deactivate", "_selected_action": [user_id]})
    assert response.status_code == 302
    assert User.objects.get(pk=user_id).is_active is False
    assert_revoked(body["accessToken"])
