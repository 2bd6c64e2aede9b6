"""Access tokens (ES256 JWTs signed with the current key of the ring) and refresh tokens (opaque)."""

from __future__ import annotations

import hashlib
import secrets

import jwt
from django.conf import settings

from apps.identity.keys import SigningKeyMissing, keyring
from merchant_platform.authentication import ALGORITHM, access_token_claims
from merchant_platform.errors import ServiceUnavailable


class SigningKeyUnavailable(ServiceUnavailable):
    default_code = "SIGNING_KEY_UNAVAILABLE"
    default_detail = "Identity has no usable signing key; tokens cannot be issued."


def issue_access_token(user_id: int) -> tuple[str, int]:
    """A signed access token and its lifetime in seconds."""
    try:
        key = keyring().signing_key()
    except SigningKeyMissing:
        raise SigningKeyUnavailable() from None
    lifetime = settings.IDENTITY_ACCESS_TOKEN_TTL_SECONDS
    claims = access_token_claims(user_id=user_id, lifetime_seconds=lifetime)
    token = jwt.encode(claims, key.private_key, algorithm=ALGORITHM, headers={"kid": key.kid, "typ": "JWT"})
    return token, lifetime


def new_refresh_secret() -> tuple[str, str]:
    """(the token handed to the client, its SHA-256 stored in the database)."""
    token = secrets.token_urlsafe(32)
    return token, refresh_digest(token)


def refresh_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
