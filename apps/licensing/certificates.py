"""Signing and publishing license certificates (spec 2.4 and 5; the format is in
merchant_platform/licenses.py, which every verifier uses).

Publication never fails the write that triggers it: it runs after the commit, and a Redis or key
problem is logged. Without the signing key (or the application secret) publication is skipped and the
cached certificate withdrawn, so consumers see null (spec 7).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from apps.licensing.models import License
from merchant_platform import crypto, licenses
from merchant_platform.logging import get_logger

DB = "licensing"
log = get_logger(__name__)


def signing_problems() -> list[str]:
    """Why this process cannot sign certificates (empty when it can)."""
    problems = []
    if not settings.APP_ENV_APPLICATION_SECRET:
        problems.append("APP_ENV_APPLICATION_SECRET is not set")
    if not settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY:
        problems.append("APP_ENV_LICENSING_ED25519_PRIVATE_KEY is not set")
    else:
        try:
            licenses.load_private_key(settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY)
        except ValueError as exc:
            problems.append(f"APP_ENV_LICENSING_ED25519_PRIVATE_KEY is unusable ({exc})")
    return problems


def certificate_payload(license: License, *, now: datetime) -> dict:
    return {
        "licenseId": str(license.id),
        "ownerId": str(license.owner_id),
        "merchantId": str(license.merchant_id) if license.merchant_id else None,
        "keyDigest": licenses.key_digest(license.key),
        "policy": license.policy.code,
        "status": license.status,
        "entitlements": license.all_entitlements(),
        "activationLimit": license.activation_limit,
        "expiresAt": licenses.format_timestamp(license.expires_at) if license.expires_at else None,
        "issuedAt": licenses.format_timestamp(now),
        "certExpiresAt": licenses.format_timestamp(now + timedelta(seconds=settings.APP_ENV_LICENSING_CERT_TTL_SECONDS)),
    }


def sign_certificate(payload: dict) -> str:
    """Seal the payload, sign the sealed text, and armor both."""
    private_key = licenses.load_private_key(settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY)
    enc = crypto.encrypt(json.dumps(payload, separators=(",", ":")), purpose=licenses.SEAL_PURPOSE)
    return licenses.armor(enc=enc, sig=private_key.sign(licenses.SIGNING_PREFIX + enc.encode()))


# Sets (or, given an empty certificate, deletes) the certificate of a version at least as new as
# the one Redis holds, and records that version; an older publisher that lost a race changes nothing.
_STORE_SCRIPT = """
local held = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) < held then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[4])
return 1
"""
# The version marker outlives any certificate, so a stale publisher arriving late still finds it.
VERSION_MARKER_TTL_SECONDS = 7 * 86_400
PENDING_SWEEP_BATCH = 500


def version_marker_key(license_id: int | str) -> str:
    return licenses.certificate_cache_key(license_id) + ":version"


def certificate_publish(license_id: int) -> str | None:
    """Sign the license's current state and cache it; returns the certificate, None when skipped
    or withdrawn. A license that no longer exists (or is deleted) has its certificate withdrawn."""
    license = License.all_objects.using(DB).select_related("policy").filter(pk=license_id).first()
    if license is None:
        _store(license_id, version=None, certificate="")
        return None
    if license.deleted_at is not None:
        if _store(license.id, version=license.certificate_version, certificate=""):
            _mark_published(license)
        return None
    return _publish(license)


def _publish(license: License) -> str | None:
    problems = signing_problems()
    if problems:
        log.debug("licensing.certificate_skipped", licenseId=str(license.id), reason="; ".join(problems))
        if _store(license.id, version=license.certificate_version, certificate=""):
            _mark_published(license)
        return None
    certificate = sign_certificate(certificate_payload(license, now=datetime.now(UTC)))
    if not _store(license.id, version=license.certificate_version, certificate=certificate):
        return None
    _mark_published(license)
    return certificate


def _store(license_id: int, *, version: int | None, certificate: str) -> bool:
    """Run the store script; False when Redis failed (the sweep retries) or held a newer version.
    Without a version (the row is gone for good) the certificate is deleted unconditionally."""
    client = get_redis_connection("default")
    try:
        if version is None:
            client.delete(licenses.certificate_cache_key(license_id))
            return True
        stored = client.eval(
            _STORE_SCRIPT,
            2,
            licenses.certificate_cache_key(license_id),
            version_marker_key(license_id),
            version,
            certificate,
            settings.APP_ENV_LICENSING_CERT_TTL_SECONDS,
            VERSION_MARKER_TTL_SECONDS,
        )
    except RedisError as exc:
        log.warning("licensing.certificate_publish_failed", licenseId=str(license_id), error=str(exc), retry="by the pending sweep")
        return False
    if not stored:
        log.info("licensing.certificate_superseded", licenseId=str(license_id), version=version)
    return bool(stored)


def _mark_published(license: License) -> None:
    License.all_objects.using(DB).filter(pk=license.id, certificate_published_version__lt=license.certificate_version).update(
        certificate_published_version=license.certificate_version
    )


def publish_on_commit(license_id: int) -> None:
    """After the commit, publish what the license now says (a deleted license's is withdrawn)."""
    transaction.on_commit(lambda: certificate_publish(license_id), using=DB)


def publish_pending_certificates() -> int:
    """The durable retry: publish (or withdraw) every license whose last publication did not reach
    Redis, oldest first; returns how many reached it."""
    pending = (
        License.all_objects.using(DB)
        .filter(certificate_published_version__lt=F("certificate_version"))
        .order_by("id")
        .values_list("id", flat=True)[:PENDING_SWEEP_BATCH]
    )
    published = 0
    for license_id in list(pending):
        certificate_publish(license_id)
        published += License.all_objects.using(DB).filter(pk=license_id, certificate_published_version=F("certificate_version")).exists()
    return published


def refresh_stale_certificates(license_ids: list[int]) -> int:
    """Re-publish the certificates that are missing or past half their lifetime; returns how many."""
    if not license_ids or signing_problems():
        return 0
    client = get_redis_connection("default")
    pipeline = client.pipeline(transaction=False)
    for license_id in license_ids:
        pipeline.ttl(licenses.certificate_cache_key(license_id))
    half_life = settings.APP_ENV_LICENSING_CERT_TTL_SECONDS / 2
    stale = [license_id for license_id, ttl in zip(license_ids, pipeline.execute(), strict=True) if ttl < half_life]
    if not stale:
        return 0
    refreshed = 0
    for license in License.objects.using(DB).select_related("policy").filter(pk__in=stale):
        refreshed += _publish(license) is not None
    return refreshed


def log_configuration_warnings() -> None:
    """Spec 7: a licensing process without its keys starts, warns, and publishes nothing."""
    for problem in signing_problems():
        log.warning("licensing.certificates_disabled", reason=problem, effect="certificates are not published; consumers read null")
    if licenses.verifying_key() is None:
        log.warning("licensing.certificates_unverifiable", reason="APP_ENV_LICENSING_ED25519_PUBLIC_KEY is not set or unusable")
