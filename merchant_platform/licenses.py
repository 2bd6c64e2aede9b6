"""License certificates: the format, and the reader any service uses (spec 2.4, 5 and 7).

Licensing publishes one certificate per license in Redis under `licensing:certificate:<licenseId>`
(expiring with the certificate). A certificate is armored text, like Keygen's license files:

    -----BEGIN LICENSE FILE-----
    base64(JSON {"enc": "<sealed payload>", "sig": "<base64 signature>", "alg": "aes-256-gcm+ed25519"})
    -----END LICENSE FILE-----

`enc` is the JSON payload sealed with AES-256-GCM under APP_ENV_APPLICATION_SECRET (merchant_platform.crypto,
purpose "license-certificate"); `sig` is the Ed25519 signature of b"license/" + enc, so the signature is
checked before anything is decrypted. The payload carries at least `licenseId`, `status`, `expiresAt`,
`entitlements` and `certExpiresAt` (docs/services/licensing.md lists every field).

`read_license(license_id)` yields the payload, or None when the certificate is missing, expired,
tampered with, signed by another key, of an unknown algorithm, or unreadable for want of a key.
None means "unknown", not "unlicensed": the caller's gate decides what unknown allows. A process
verifies the signature of a given certificate once and remembers the result for those exact bytes;
certExpiresAt is checked on every read.
`presented_license(license_id, key)` is what a request presents (the License-Id and License-Key
headers): the payload only when the key is the license's own (its SHA-256 `keyDigest` is in the
payload), so a license id learned elsewhere grants nothing. The kernel's LicenseMiddleware puts it on
every request as `request.license`, and each service's gate decides what None allows.
This module never imports apps.licensing, so every service can use it in split mode.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from datetime import UTC, datetime
from functools import lru_cache

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)
from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from merchant_platform import crypto
from merchant_platform.logging import get_logger

ALGORITHM = "aes-256-gcm+ed25519"
SEAL_PURPOSE = "license-certificate"
SIGNING_PREFIX = b"license/"
BEGIN_MARKER = "-----BEGIN LICENSE FILE-----"
END_MARKER = "-----END LICENSE FILE-----"
CACHE_KEY = "licensing:certificate:{license_id}"
ARMOR_LINE_LENGTH = 64
LICENSE_ID_HEADER = "License-Id"
LICENSE_KEY_HEADER = "License-Key"
MAX_LICENSE_ID_DIGITS = 20
# Certificates verified by this process, remembered by their exact text (see _verified_plaintext).
VERIFIED_CACHE_SIZE = 4096

log = get_logger(__name__)


class CertificateRejected(Exception):
    """The certificate cannot be trusted; `reason` is a stable word for logs."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def certificate_cache_key(license_id: int | str) -> str:
    return CACHE_KEY.format(license_id=license_id)


def format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def armor(*, enc: str, sig: bytes) -> str:
    body = base64.b64encode(json.dumps({"enc": enc, "sig": base64.b64encode(sig).decode(), "alg": ALGORITHM}).encode()).decode()
    lines = [body[i : i + ARMOR_LINE_LENGTH] for i in range(0, len(body), ARMOR_LINE_LENGTH)]
    return "\n".join([BEGIN_MARKER, *lines, END_MARKER]) + "\n"


def unarmor(text: str) -> dict:
    """The {enc, sig, alg} document inside the armor."""
    stripped = text.strip()
    if not (stripped.startswith(BEGIN_MARKER) and stripped.endswith(END_MARKER)):
        raise CertificateRejected("malformed")
    body = "".join(stripped[len(BEGIN_MARKER) : -len(END_MARKER)].split())
    try:
        document = json.loads(base64.b64decode(body, validate=True))
    except (binascii.Error, ValueError):
        raise CertificateRejected("malformed") from None
    if not isinstance(document, dict) or not all(isinstance(document.get(k), str) for k in ("enc", "sig", "alg")):
        raise CertificateRejected("malformed")
    return document


def pem_pair(private_key: Ed25519PrivateKey | None = None) -> tuple[str, str]:
    """(private, public) PEM of `private_key`, or of a new key: the values of
    APP_ENV_LICENSING_ED25519_PRIVATE_KEY and APP_ENV_LICENSING_ED25519_PUBLIC_KEY."""
    key = private_key or Ed25519PrivateKey.generate()
    return (
        key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode(),
        key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode(),
    )


@lru_cache(maxsize=4)
def load_private_key(pem: str) -> Ed25519PrivateKey:
    key = load_pem_private_key(pem.encode(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("APP_ENV_LICENSING_ED25519_PRIVATE_KEY is not an Ed25519 key")
    return key


@lru_cache(maxsize=4)
def load_public_key(pem: str) -> Ed25519PublicKey:
    key = load_pem_public_key(pem.encode())
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("APP_ENV_LICENSING_ED25519_PUBLIC_KEY is not an Ed25519 key")
    return key


def _configured_key(public_pem: str, private_pem: str) -> Ed25519PublicKey | None:
    try:
        if public_pem:
            return load_public_key(public_pem)
        if private_pem:
            return load_private_key(private_pem).public_key()
    except ValueError as exc:
        log.warning("license.verifying_key_invalid", error=str(exc))
    return None


def verifying_key() -> Ed25519PublicKey | None:
    """The configured public key, or the public half of the signing key (a signer verifies itself)."""
    return _configured_key(settings.APP_ENV_LICENSING_ED25519_PUBLIC_KEY, settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY)


def verify_and_unseal(text: str, *, public_key: Ed25519PublicKey, secret: str | None = None) -> bytes:
    """The sealed payload's plaintext: the algorithm and signature are checked before decrypting."""
    document = unarmor(text)
    if document["alg"] != ALGORITHM:
        raise CertificateRejected("unknown_algorithm")
    try:
        public_key.verify(base64.b64decode(document["sig"], validate=True), SIGNING_PREFIX + document["enc"].encode())
    except (InvalidSignature, binascii.Error, ValueError):
        raise CertificateRejected("bad_signature") from None
    try:
        return crypto.decrypt_bytes(document["enc"], purpose=SEAL_PURPOSE, secret=secret)
    except crypto.DecryptionFailed:
        raise CertificateRejected("unsealable") from None


def checked_payload(plaintext: bytes, *, now: datetime | None = None) -> dict:
    """The payload, unless it is malformed or past its certExpiresAt."""
    try:
        payload = json.loads(plaintext)
        cert_expires_at = datetime.fromisoformat(payload["certExpiresAt"])
    except (KeyError, TypeError, ValueError):
        raise CertificateRejected("malformed") from None
    if cert_expires_at.tzinfo is None:
        raise CertificateRejected("malformed")
    if cert_expires_at <= (now or datetime.now(UTC)):
        raise CertificateRejected("expired")
    return payload


def verify_and_open(text: str, *, public_key: Ed25519PublicKey, now: datetime | None = None) -> dict:
    """The payload of a certificate, or CertificateRejected saying why it cannot be trusted."""
    return checked_payload(verify_and_unseal(text, public_key=public_key), now=now)


@lru_cache(maxsize=VERIFIED_CACHE_SIZE)
def _verified_plaintext(text: str, public_pem: str, private_pem: str, secret: str) -> bytes:
    """verify_and_unseal, remembered per process for the exact certificate text and keys: the same
    bytes under the same keys verify the same way, so a busy reader pays the signature check once
    per certificate. Rejections are not remembered, and certExpiresAt is checked on every call."""
    public_key = _configured_key(public_pem, private_pem)
    if public_key is None:
        raise CertificateRejected("no_public_key")
    return verify_and_unseal(text, public_key=public_key, secret=secret)


def open_certificate(text: str, *, license_id: int | str | None = None, now: datetime | None = None) -> dict | None:
    """Verify and open a certificate; None when it cannot be trusted (the reason is logged)."""
    try:
        plaintext = _verified_plaintext(
            text,
            settings.APP_ENV_LICENSING_ED25519_PUBLIC_KEY,
            settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY,
            settings.APP_ENV_APPLICATION_SECRET,
        )
        payload = checked_payload(plaintext, now=now)
    except CertificateRejected as exc:
        # An expired certificate is routine (licensing refreshes it); anything else is suspicious.
        level = log.debug if exc.reason == "expired" else log.warning
        level("license.certificate_rejected", reason=exc.reason, licenseId=str(license_id) if license_id else None)
        return None
    if license_id is not None and str(payload.get("licenseId")) != str(license_id):
        # A valid certificate of another license copied under this key.
        log.warning("license.certificate_rejected", reason="wrong_license", licenseId=str(license_id))
        return None
    return payload


def license_in_force(payload: dict | None, *, now: datetime | None = None) -> bool | None:
    """True when a payload grants use now (ACTIVATED and not past expiresAt), None when unknown.

    Expiry is lazy in licensing (spec 3.2): a certificate may still say ACTIVATED past expiresAt.
    """
    if payload is None:
        return None
    if payload.get("status") != "ACTIVATED":
        return False
    expires_at = payload.get("expiresAt")
    return expires_at is None or datetime.fromisoformat(expires_at) > (now or datetime.now(UTC))


def read_license(license_id: int | str, *, now: datetime | None = None) -> dict | None:
    """The verified payload of the license's cached certificate, or None meaning unknown."""
    try:
        raw = get_redis_connection("default").get(certificate_cache_key(license_id))
    except RedisError as exc:
        log.warning("license.certificate_unavailable", licenseId=str(license_id), error=str(exc))
        return None
    if raw is None:
        return None
    return open_certificate(raw.decode() if isinstance(raw, bytes) else raw, license_id=license_id, now=now)


def key_digest(key: str) -> str:
    """What a certificate carries of its license's key (`keyDigest`): the key itself never leaves licensing."""
    return hashlib.sha256(key.encode()).hexdigest()


def presented_license(license_id: str | None, key: str | None, *, now: datetime | None = None) -> dict | None:
    """The payload of the license a caller presents with its key, or None meaning unknown: nothing
    presented, a malformed id, a certificate read_license cannot trust, or a key that is not the
    license's (compared in constant time)."""
    if not license_id or not key or not license_id.isdigit() or len(license_id) > MAX_LICENSE_ID_DIGITS:
        return None
    payload = read_license(license_id, now=now)
    if payload is None:
        return None
    digest = payload.get("keyDigest")
    if not isinstance(digest, str) or not hmac.compare_digest(digest, key_digest(key)):
        log.warning("license.key_mismatch", licenseId=license_id)
        return None
    return payload
