"""Tokens and policies for tests of any service (see docs/authentication.md, "Testing a view").

The module holds one ES256 test key per test process and pins its public key in the verifier's key
cache (`jwks_cache.pin`), so tokens minted here go through the real `JWTAuthentication`: nothing of the
verification is mocked. Policies are real `PolicyDefinition` rows written through the kernel's policy
functions, so tests need the database (`@pytest.mark.django_db(databases="__all__")`).

    from tests.support.auth import make_caller

    def test_owner_sees_own_accounts(db_all):
        caller = make_caller(roles=["OWNER"])
        response = caller.client().get("/v1/api/finance/accounts")

Fixtures (registered for the whole suite through tests/conftest.py): `make_caller`, `mint_token`,
`service_client`, and `jwks_url` (the test key set over HTTP, for the processes a test starts).
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from rest_framework.test import APIClient

from merchant_platform import policy
from merchant_platform.verification.jwks import ALGORITHM, jwks_cache, public_jwk
from merchant_platform.verification.service_accounts import basic_auth_header
from merchant_platform.verification.tokens import access_token_claims

Grant = str | tuple[str, str | int]


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private_key: ec.EllipticCurvePrivateKey
    public_jwk: dict


def new_signing_key() -> SigningKey:
    """A fresh P-256 key with its public JWK (kid = RFC 7638 thumbprint), not pinned."""
    private_key = ec.generate_private_key(ec.SECP256R1())
    jwk = public_jwk(private_key.public_key())
    return SigningKey(kid=jwk["kid"], private_key=private_key, public_jwk=jwk)


@cache
def signing_key() -> SigningKey:
    """The process's test signing key, trusted by the verifier for the whole run."""
    key = new_signing_key()
    jwks_cache.pin(key.public_jwk)
    return key


def random_user_id() -> int:
    """A user id no other test uses (users of other services are plain ids)."""
    return random.getrandbits(62) | (1 << 40)


def mint_token(user_id: int, *, lifetime_seconds: int = 900, key: SigningKey | None = None, headers: dict | None = None, **claims) -> str:
    """A signed access token for `user_id`; `claims` override or add claims (iss, aud, exp...)."""
    key = key or signing_key()
    payload = {**access_token_claims(user_id=user_id, lifetime_seconds=lifetime_seconds), **claims}
    return jwt.encode(payload, key.private_key, algorithm=ALGORITHM, headers={"kid": key.kid, **(headers or {})})


def bearer(token: str) -> dict:
    """Headers for Django's test client: `client.get(url, **bearer(token))`."""
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def _split(grant: Grant) -> tuple[str, str]:
    return (grant, policy.ANY) if isinstance(grant, str) else (grant[0], str(grant[1]))


def grant(
    user_id: int,
    *,
    roles: Iterable[Grant] = (),
    permissions: Iterable[Grant] = (),
    merchants: Iterable[str | int] = (),
    denied: Iterable[Grant] = (),
    joined: Iterable[str | int] = (),
) -> None:
    """Write real policies for `user_id`.

    roles: "ADMIN" (everywhere) or ("EMPLOYEE", merchant_id); permissions / denied: "finance.Account.read"
    (everywhere) or ("finance.Account.read", merchant_id); merchants: tenants the user joins as their
    creator (commerce's merchant creation); joined: tenants it joins as a plain member (identity's policy API).
    """
    for role in roles:
        name, domain = _split(role)
        policy.policy_grant_role(user_id=user_id, role=name, domain=domain)
    for permission, effect in [*((p, "allow") for p in permissions), *((p, "deny") for p in denied)]:
        name, domain = _split(permission)
        resource, action = policy.parse_permission(name)
        policy.policy_grant_permission(user_id=user_id, resource=resource, action=action, domain=domain, effect=effect)
    for merchant in merchants:
        policy.policy_join_domain(user_id=user_id, domain=merchant, source=policy.MERCHANT_CREATE_SOURCE)
    for merchant in joined:
        policy.policy_join_domain(user_id=user_id, domain=merchant)


@dataclass(frozen=True)
class Caller:
    """A user with policies and a valid token."""

    user_id: int
    token: str

    @property
    def headers(self) -> dict:
        return bearer(self.token)

    def client(self) -> APIClient:
        client = APIClient()
        client.credentials(**self.headers)
        return client


def make_caller(
    *,
    roles: Iterable[Grant] = (),
    permissions: Iterable[Grant] = (),
    merchants: Iterable[str | int] = (),
    denied: Iterable[Grant] = (),
    joined: Iterable[str | int] = (),
    user_id: int | None = None,
    lifetime_seconds: int = 900,
) -> Caller:
    """A new user id with the given roles, permissions and tenant memberships, and its token."""
    user_id = user_id or random_user_id()
    grant(user_id, roles=roles, permissions=permissions, merchants=merchants, denied=denied, joined=joined)
    return Caller(user_id=user_id, token=mint_token(user_id, lifetime_seconds=lifetime_seconds))


def service_headers() -> dict:
    """Headers of a service-to-service call (HTTP Basic with this process's own account)."""
    return {"HTTP_AUTHORIZATION": basic_auth_header()}


# --- pytest hooks and fixtures ---


def pytest_sessionstart(session):
    """The development keypair in var/ (IDENTITY_SIGNING_KEY_PATH): processes that tests start refuse
    to run identity without one, as production does."""
    from django.conf import settings

    from apps.identity.keys import ensure_key

    ensure_key(Path(settings.IDENTITY_SIGNING_KEY_PATH))


@pytest.fixture(name="make_caller")
def make_caller_fixture():
    """`make_caller(roles=[...], permissions=[...], merchants=[...], joined=[...])` -> Caller (needs the database)."""
    return make_caller


@pytest.fixture(name="mint_token")
def mint_token_fixture():
    return mint_token


@pytest.fixture
def service_client() -> APIClient:
    """A client authenticated as a platform service (HTTP Basic)."""
    client = APIClient()
    client.credentials(**service_headers())
    return client


@pytest.fixture(scope="session")
def jwks_url():
    """Identity's key set as a verifier in another process fetches it over HTTP (GET /jw-certs),
    holding the test process's signing key, so tokens minted by the tests verify in the server
    processes."""
    document = json.dumps({"keys": [signing_key().public_jwk]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args):
            """No access log on stderr."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/jw-certs"
    server.shutdown()
