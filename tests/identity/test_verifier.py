"""The kernel's JWT verifier (merchant_platform.verification) through a real DRF view."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from merchant_platform.verification.jwks import JWKSCache, jwks_cache
from merchant_platform.verification.tokens import TokenRejected, verified_tokens, verify_access_token
from tests.support.auth import bearer, mint_token, new_signing_key, random_user_id, service_headers, signing_key

pytestmark = pytest.mark.usefixtures("policy_urls")
WHOAMI = "/policy-test/whoami"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unsigned_parts(header: dict, claims: dict) -> str:
    return b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())


def claims_for(user_id: int, **overrides) -> dict:
    return jwt.decode(mint_token(user_id, **overrides), options={"verify_signature": False})


def assert_rejected(response, code: str) -> None:
    assert response.status_code == 401, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == code
    assert body["status"] == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_valid_token_authenticates(client):
    user_id = random_user_id()
    response = client.get(WHOAMI, **bearer(mint_token(user_id)))
    assert response.status_code == 200
    assert response.json()["userId"] == str(user_id)


def test_no_credentials_is_a_401_problem(client):
    response = client.get(WHOAMI)
    assert response.status_code == 401
    assert response.json()["code"] == "UNAUTHENTICATED"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_alg_none_is_rejected(client):
    token = unsigned_parts({"alg": "none", "typ": "JWT", "kid": signing_key().kid}, claims_for(random_user_id())) + "."
    assert_rejected(client.get(WHOAMI, **bearer(token)), "TOKEN_ALGORITHM_REJECTED")


def test_hs256_signed_with_the_public_key_is_rejected(client):
    """The classic confusion: an attacker signs with HMAC using the published public key as secret."""
    public_pem = (
        signing_key().private_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    signing_input = unsigned_parts({"alg": "HS256", "typ": "JWT", "kid": signing_key().kid}, claims_for(random_user_id()))
    signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    assert_rejected(client.get(WHOAMI, **bearer(signing_input + "." + b64(signature))), "TOKEN_ALGORITHM_REJECTED")


def test_expired_token_is_rejected(client):
    past = int(time.time()) - 3600
    token = mint_token(random_user_id(), iat=past - 900, nbf=past - 900, exp=past)
    assert_rejected(client.get(WHOAMI, **bearer(token)), "TOKEN_EXPIRED")


def test_wrong_issuer_is_rejected(client):
    assert_rejected(client.get(WHOAMI, **bearer(mint_token(random_user_id(), iss="someone-else"))), "TOKEN_ISSUER_INVALID")


def test_wrong_audience_is_rejected(client):
    assert_rejected(client.get(WHOAMI, **bearer(mint_token(random_user_id(), aud="another-platform"))), "TOKEN_AUDIENCE_INVALID")


def test_tampered_claims_are_rejected(client):
    header, _, signature = mint_token(random_user_id()).split(".")
    forged = b64(json.dumps(claims_for(random_user_id())).encode())
    assert_rejected(client.get(WHOAMI, **bearer(f"{header}.{forged}.{signature}")), "TOKEN_INVALID")


def test_a_key_nobody_published_is_unknown(client):
    stranger = new_signing_key()
    assert_rejected(client.get(WHOAMI, **bearer(mint_token(random_user_id(), key=stranger))), "TOKEN_KEY_UNKNOWN")


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer not-a-jwt"])
def test_malformed_bearer_values_are_rejected(client, header):
    assert_rejected(client.get(WHOAMI, HTTP_AUTHORIZATION=header), "TOKEN_INVALID")


def test_a_user_token_cannot_reach_an_internal_endpoint(client):
    assert client.get("/policy-test/internal", **bearer(mint_token(random_user_id()))).status_code == 403
    assert client.get("/policy-test/internal", **service_headers()).json() == {"caller": "platform"}


def test_unknown_kids_refetch_at_most_once_per_interval(settings):
    """A flood of made-up kids costs identity one fetch per interval, and a new key is found."""
    settings.JWKS_REFETCH_MIN_INTERVAL_SECONDS = 0.3
    rotated = new_signing_key()
    published = {"keys": [signing_key().public_jwk]}
    fetches = []

    def source():
        fetches.append(time.monotonic())
        return published

    verifier = JWKSCache()
    verifier.set_local_source(source)
    for index in range(50):
        assert verifier.key_for(f"made-up-{index}") is None
    assert len(fetches) == 1
    published = {"keys": [signing_key().public_jwk, rotated.public_jwk]}
    assert verifier.key_for(rotated.kid) is None  # still within the interval: no second fetch
    time.sleep(0.35)
    assert verifier.key_for(rotated.kid) is not None
    assert len(fetches) == 2


def test_verifications_during_the_first_fetch_wait_for_it(settings):
    """A replica that just started gets several tokens at once: the ones that arrive while the
    first fetch of the key set is in flight wait for it instead of calling the kid unknown."""
    settings.JWKS_REFETCH_MIN_INTERVAL_SECONDS = 5
    key = new_signing_key()
    fetching = threading.Event()

    def slow_source():
        fetching.set()
        time.sleep(0.5)
        return {"keys": [key.public_jwk]}

    verifier = JWKSCache()
    verifier.set_local_source(slow_source)
    first = threading.Thread(target=verifier.key_for, args=(key.kid,))
    first.start()
    assert fetching.wait(5)
    assert verifier.key_for(key.kid) is not None  # arrived mid-fetch
    first.join()


def test_keys_survive_an_identity_outage_through_the_shared_copy(settings):
    """A process that starts while identity is down verifies with the key set kept in Redis."""
    key = new_signing_key()
    JWKSCache._store_shared_copy({"keys": [key.public_jwk]})  # what a verifier that fetched it stored
    settings.IDENTITY_JWKS_URL = "http://127.0.0.1:9/jw-certs"  # nothing listens on the discard port
    verifier = JWKSCache()
    assert verifier.key_for(key.kid) is not None


def test_verify_access_token_outside_drf():
    user_id = random_user_id()
    user = verify_access_token(mint_token(user_id))
    assert user.id == user_id and user.is_authenticated and not user.is_service
    assert signing_key().kid in jwks_cache.kids()


def test_a_verified_token_is_remembered_but_still_expires(settings):
    settings.JWT_LEEWAY_SECONDS = 0
    now = int(time.time())
    token = mint_token(random_user_id(), iat=now, nbf=now, exp=now + 1)
    verify_access_token(token)
    assert verified_tokens.get(token) is not None
    time.sleep(1.05)
    with pytest.raises(TokenRejected) as rejected:
        verify_access_token(token)
    assert rejected.value.code == "TOKEN_EXPIRED"


def test_a_remembered_token_fails_once_its_key_is_gone():
    key = new_signing_key()
    jwks_cache.pin(key.public_jwk)
    token = mint_token(random_user_id(), key=key)
    verify_access_token(token)
    jwks_cache.unpin(key.kid)
    with pytest.raises(TokenRejected) as rejected:
        verify_access_token(token)
    assert rejected.value.code == "TOKEN_KEY_UNKNOWN"
