"""AES-256-GCM for secrets at rest, keyed by APP_ENV_APPLICATION_SECRET (spec 5).

Format: `v1.<base64url(nonce | ciphertext | tag)>`. The key is HKDF-SHA256 of the application
secret, so any secret length works and the version prefix lets the scheme change without ambiguity.
A value sealed under another secret fails to open: the failure is logged as `decrypt failed` and
raised as `DecryptionFailed`, which the API turns into a clear error, never a crash.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from merchant_platform.errors import ApiError
from merchant_platform.logging import get_logger

VERSION = "v1"
NONCE_BYTES = 12
log = get_logger(__name__)


class DecryptionFailed(ApiError):
    status_code = 500
    default_code = "DECRYPT_FAILED"
    default_detail = "A stored secret cannot be decrypted with this service's APP_ENV_APPLICATION_SECRET."


@lru_cache(maxsize=8)
def _derive_key(secret: str, purpose: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"merchant-platform", info=purpose.encode()).derive(secret.encode())


def _key(purpose: str, secret: str | None) -> bytes:
    return _derive_key(secret if secret is not None else settings.APP_ENV_APPLICATION_SECRET, purpose)


def encrypt(plaintext: str | bytes, *, purpose: str = "credential", associated_data: bytes | None = None, secret: str | None = None) -> str:
    data = plaintext.encode() if isinstance(plaintext, str) else plaintext
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(_key(purpose, secret)).encrypt(nonce, data, associated_data)
    return f"{VERSION}.{base64.urlsafe_b64encode(nonce + sealed).decode().rstrip('=')}"


def decrypt_bytes(token: str, *, purpose: str = "credential", associated_data: bytes | None = None, secret: str | None = None) -> bytes:
    try:
        version, _, body = token.partition(".")
        if version != VERSION:
            raise ValueError(f"unknown ciphertext version {version!r}")
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return AESGCM(_key(purpose, secret)).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], associated_data)
    except (InvalidTag, ValueError, TypeError) as exc:
        log.error("decrypt failed", purpose=purpose, reason=type(exc).__name__)
        raise DecryptionFailed() from None


def decrypt(token: str, **kwargs) -> str:
    return decrypt_bytes(token, **kwargs).decode()


def mac(data: bytes, *, purpose: str) -> str | None:
    """HMAC-SHA256 of `data` under a key derived from APP_ENV_APPLICATION_SECRET for `purpose`
    (base64url): how the platform authenticates what it leaves in a shared store such as Redis.
    None when no application secret is configured: the caller must then not trust the store."""
    secret = settings.APP_ENV_APPLICATION_SECRET
    if not secret:
        return None
    tag = hmac.new(_derive_key(secret, f"mac:{purpose}"), data, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(tag).decode().rstrip("=")


def mac_verifies(data: bytes, tag: object, *, purpose: str) -> bool:
    """Does `tag` authenticate `data` for `purpose`? Compared in constant time; False without a secret."""
    expected = mac(data, purpose=purpose)
    return expected is not None and isinstance(tag, str) and hmac.compare_digest(expected.encode(), tag.encode())


def mask(value: str | None, *, visible: int = 4) -> str:
    """A display form that never reveals a secret: the last few characters of a long one, or stars."""
    if not value:
        return ""
    if len(value) < 4 * visible:
        return "*" * 8
    return "*" * 8 + value[-visible:]
