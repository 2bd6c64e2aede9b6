"""Access tokens (ES256 JWTs signed with the current key of the ring) and refresh tokens (opaque)."""

from __future__ import annotations

import hashlib
import json
import secrets

import jwt
from django.conf import settings
from django_redis import get_redis_connection
from redis import RedisError

from apps.identity.keys import SigningKeyMissing, keyring
from merchant_platform import crypto
from merchant_platform.errors import ServiceUnavailable
from merchant_platform.logging import get_logger
from merchant_platform.verification.jwks import ALGORITHM
from merchant_platform.verification.tokens import access_token_claims

log = get_logger(__name__)
ROTATION_KEY_PREFIX = "mp:identity:refresh-rotation"
_ROTATION_PURPOSE = "identity-refresh-rotation"


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


# --- The refresh grace: what a rotation handed out, for IDENTITY_REFRESH_REUSE_GRACE_SECONDS ------


def remember_rotation(old_digest: str, pair: dict) -> None:
    """Keep the pair that rotating `old_digest` produced, sealed (AES-GCM, bound to the old token's
    digest), in Redis for the grace period. Without Redis there is no grace: a second presentation
    is then treated as reuse, as before."""
    grace = settings.IDENTITY_REFRESH_REUSE_GRACE_SECONDS
    if grace <= 0:
        return
    sealed = crypto.encrypt(json.dumps(pair), purpose=_ROTATION_PURPOSE, associated_data=old_digest.encode())
    try:
        get_redis_connection("default").set(f"{ROTATION_KEY_PREFIX}:{old_digest}", sealed, ex=grace)
    except RedisError as exc:
        log.warning("identity.refresh_grace_not_stored", error=type(exc).__name__)


def remembered_rotation(old_digest: str) -> dict | None:
    """The pair remembered for `old_digest`, or None (expired, never stored, Redis down, tampered)."""
    try:
        sealed = get_redis_connection("default").get(f"{ROTATION_KEY_PREFIX}:{old_digest}")
    except RedisError as exc:
        log.warning("identity.refresh_grace_unavailable", error=type(exc).__name__)
        return None
    if not sealed:
        return None
    try:
        return json.loads(crypto.decrypt(sealed.decode(), purpose=_ROTATION_PURPOSE, associated_data=old_digest.encode()))
    except (crypto.DecryptionFailed, ValueError):
        return None
