"""Accounts, password sign-in, refresh tokens, sign-out, current user and password change."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from apps.identity import services
from apps.identity.models import RefreshToken, User
from tests.identity.conftest import API, PASSWORD, post, sign_in, sign_up
from tests.support.logs import LogCapture

pytestmark = pytest.mark.django_db(databases="__all__")


def bearer(body: dict) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {body['accessToken']}"}


def test_sign_up_normalizes_every_identifier(client):
    body = sign_up(client, email="  Ada.Lovelace@Example.COM ", phone="+1 (415) 555-0123", username="Ada_L")
    assert body["tokenType"] == "Bearer" and body["expiresIn"] == 900
    user = body["user"]
    assert (user["email"], user["phone"], user["username"]) == ("ada.lovelace@example.com", "+14155550123", "ada_l")
    assert isinstance(user["id"], str) and int(user["id"]) > 2**53
    assert "password" not in str(body).lower().replace("passwordchangedat", "")


@pytest.mark.parametrize(
    ("identifiers", "field"),
    [
        ({"email": "not-an-email"}, "email"),
        ({"phone": "+1 555"}, "phone"),
        ({"username": "1starts-with-digit"}, "username"),
        ({}, "identifier"),
    ],
)
def test_sign_up_rejects_bad_identifiers_by_field(client, identifiers, field):
    response = post(client, "/auth/sign-up", {**identifiers, "password": PASSWORD})
    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_ERROR"
    assert field in {error["field"] for error in response.json()["errors"]}


def test_sign_up_refuses_short_passwords_and_taken_identifiers(client):
    short = post(client, "/auth/sign-up", {"email": "short@example.com", "password": "short"})
    assert short.status_code == 400 and short.json()["errors"][0]["field"] == "password"
    sign_up(client, email="taken@example.com")
    taken = post(client, "/auth/sign-up", {"email": "TAKEN@example.com", "password": PASSWORD})
    assert taken.status_code == 409
    assert taken.json()["code"] == "IDENTIFIER_TAKEN" and taken.json()["field"] == "email"


def test_passwords_are_argon2id_with_the_configured_parameters(client, production_argon2):
    sign_up(client, username="hashcheck")
    stored = User.objects.get(username="hashcheck").password_hash
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert PASSWORD not in stored


@pytest.mark.parametrize("identifier", ["grace@example.com", "GRACE@EXAMPLE.COM", "+44 20 7946 0958", "+442079460958", "Grace"])
def test_sign_in_by_any_identifier(client, identifier):
    sign_up(client, verified=True, email="grace@example.com", phone="+442079460958", username="grace")
    response = sign_in(client, identifier)
    assert response.status_code == 200, response.content
    assert response.json()["user"]["username"] == "grace"


def test_wrong_password_and_unknown_identifier_look_the_same(client):
    sign_up(client, email="known@example.com")
    wrong = sign_in(client, "known@example.com", "not the password at all")
    unknown = sign_in(client, "nobody@example.com", "not the password at all")
    garbage = sign_in(client, "???", "not the password at all")
    for response in (wrong, unknown, garbage):
        assert response.status_code == 401
        assert response.json()["code"] == "INVALID_CREDENTIALS"
    assert wrong.json()["detail"] == unknown.json()["detail"]


def test_current_user(client):
    body = sign_up(client, email="me@example.com")
    response = client.get(f"{API}/users/me", **bearer(body))
    assert response.status_code == 200
    assert response.json()["email"] == "me@example.com"
    assert client.get(f"{API}/users/me").status_code == 401


def test_refresh_rotates_and_a_reused_token_revokes_the_session(client, settings):
    settings.IDENTITY_REFRESH_REUSE_GRACE_SECONDS = 0  # the grace has its own tests below
    first = sign_up(client, email="rotate@example.com")
    second = post(client, "/auth/refresh", {"refreshToken": first["refreshToken"]})
    assert second.status_code == 200
    assert second.json()["refreshToken"] != first["refreshToken"]
    assert client.get(f"{API}/users/me", **bearer(second.json())).status_code == 200
    replay = post(client, "/auth/refresh", {"refreshToken": first["refreshToken"]})
    assert replay.status_code == 401 and replay.json()["code"] == "REFRESH_TOKEN_INVALID"
    # The replay shows the first token was copied: the token issued from it is revoked too.
    assert post(client, "/auth/refresh", {"refreshToken": second.json()["refreshToken"]}).status_code == 401


def test_a_replay_within_the_grace_gets_the_same_pair_and_reuse_detection_stays(client):
    first = sign_up(client, email="twotabs@example.com")
    second = post(client, "/auth/refresh", {"refreshToken": first["refreshToken"]}).json()
    again = post(client, "/auth/refresh", {"refreshToken": first["refreshToken"]})
    assert again.status_code == 200
    assert (again.json()["refreshToken"], again.json()["accessToken"]) == (second["refreshToken"], second["accessToken"])
    # The family lives on; once its newest token has been rotated, the old one is reuse again.
    third = post(client, "/auth/refresh", {"refreshToken": second["refreshToken"]})
    assert third.status_code == 200
    assert post(client, "/auth/refresh", {"refreshToken": first["refreshToken"]}).status_code == 401
    assert post(client, "/auth/refresh", {"refreshToken": third.json()["refreshToken"]}).status_code == 401


def test_a_replay_after_the_grace_revokes_the_family(client, settings):
    first = sign_up(client, email="late@example.com")
    second = post(client, "/auth/refresh", {"refreshToken": first["refreshToken"]}).json()
    grace = settings.IDENTITY_REFRESH_REUSE_GRACE_SECONDS
    RefreshToken.objects.filter(revoked_reason="rotated").update(revoked_at=timezone.now() - timedelta(seconds=grace + 1))
    assert post(client, "/auth/refresh", {"refreshToken": first["refreshToken"]}).status_code == 401
    assert post(client, "/auth/refresh", {"refreshToken": second["refreshToken"]}).status_code == 401


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_two_concurrent_refreshes_with_one_token_get_one_pair():
    """Two tabs refresh at the same moment with the same token: both get the same new pair and the
    session survives (before, the second was taken for a stolen copy and the family was revoked)."""
    user = User.objects.create(email="race@example.com", password_hash="unused")
    token = services._issue_pair(user).refresh_token
    results, start = [], threading.Barrier(2)

    def refresh():
        start.wait()
        try:
            results.append(services.token_refresh(refresh_token=token).refresh_token)
        except services.RefreshTokenInvalid:
            results.append(None)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=refresh) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert None not in results and results[0] == results[1]
    assert services.token_refresh(refresh_token=results[0]).refresh_token


def test_sign_out_revokes_the_refresh_token(client):
    body = sign_up(client, verified=True, email="bye@example.com")
    other_session = sign_in(client, "bye@example.com").json()
    assert post(client, "/auth/sign-out", {"refreshToken": body["refreshToken"]}).status_code == 204
    assert post(client, "/auth/refresh", {"refreshToken": body["refreshToken"]}).status_code == 401
    assert post(client, "/auth/refresh", {"refreshToken": other_session["refreshToken"]}).status_code == 200
    assert post(client, "/auth/sign-out", {"refreshToken": "unknown"}).status_code == 204


def test_change_password_ends_other_sessions(client):
    body = sign_up(client, verified=True, email="change@example.com")
    wrong = post(
        client, "/users/me/password", {"currentPassword": "nope nope nope", "newPassword": "another long password"}, **bearer(body)
    )
    assert wrong.status_code == 400 and wrong.json()["code"] == "CURRENT_PASSWORD_WRONG"
    changed = post(client, "/users/me/password", {"currentPassword": PASSWORD, "newPassword": "another long password"}, **bearer(body))
    assert changed.status_code == 200
    assert post(client, "/auth/refresh", {"refreshToken": body["refreshToken"]}).status_code == 401
    assert post(client, "/auth/refresh", {"refreshToken": changed.json()["refreshToken"]}).status_code == 200
    assert sign_in(client, "change@example.com").status_code == 401
    assert sign_in(client, "change@example.com", "another long password").status_code == 200


def test_refresh_tokens_are_stored_hashed(client):
    body = sign_up(client, email="hashed@example.com")
    stored = RefreshToken.objects.get(user_id=int(body["user"]["id"])).token_hash
    assert body["refreshToken"] not in stored and len(stored) == 64


def test_secrets_never_reach_the_logs(client, capsys):
    capture = LogCapture(capsys)
    logging.getLogger().addHandler(capture.handler)
    try:
        body = sign_up(client, email="quiet@example.com")
        sign_in(client, "quiet@example.com", "a wrong password here")
        post(client, "/auth/refresh", {"refreshToken": body["refreshToken"]})
    finally:
        logging.getLogger().removeHandler(capture.handler)
    text = "\n".join(capture.lines)
    assert "identity.user_signed_up" in text
    for secret in (PASSWORD, "a wrong password here", body["refreshToken"], body["accessToken"]):
        assert secret not in text
