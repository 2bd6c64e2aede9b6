"""License certificates: publication by licensing, and the kernel reader every service uses."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from django_redis import get_redis_connection

from apps.licensing import certificates, services
from apps.licensing.models import License
from merchant_platform import crypto, licenses
from tests.support.waiting import wait_for

ALL = "__all__"


def cached(license_id) -> str | None:
    raw = get_redis_connection("default").get(licenses.certificate_cache_key(license_id))
    return raw.decode() if raw else None


def store(license_id, text: str) -> None:
    get_redis_connection("default").set(licenses.certificate_cache_key(license_id), text, ex=60)


def reforge(text: str, **changes) -> str:
    """The same certificate with fields of its {enc, sig, alg} document replaced."""
    document = licenses.unarmor(text)
    document.update(changes)
    body = base64.b64encode(json.dumps(document).encode()).decode()
    return f"{licenses.BEGIN_MARKER}\n{body}\n{licenses.END_MARKER}\n"


@pytest.fixture
def published(make_license, on_commit):
    with on_commit():
        license = make_license(merchant_id=555, entitlements=["reports"])
    return License.objects.get(pk=license.id)


@pytest.mark.django_db(databases=ALL)
class TestPublication:
    def test_activation_publishes_a_certificate_the_reader_opens(self, published, settings):
        text = cached(published.id)
        assert text.startswith(licenses.BEGIN_MARKER + "\n") and text.rstrip().endswith(licenses.END_MARKER)
        assert licenses.unarmor(text)["alg"] == "aes-256-gcm+ed25519"
        payload = licenses.read_license(published.id)
        assert payload["licenseId"] == str(published.id)
        assert payload["status"] == "ACTIVATED"
        assert payload["ownerId"] == "4242" and payload["merchantId"] == "555"
        assert payload["policy"] == "FREE_TRIAL"
        assert payload["entitlements"] == ["reports"]
        assert payload["activationLimit"] == 2
        assert abs(datetime.fromisoformat(payload["expiresAt"]) - published.expires_at) < timedelta(milliseconds=1)
        assert licenses.license_in_force(payload) is True
        assert "key" not in payload

    def test_both_expiries_are_bounded_by_the_ttl(self, make_license, on_commit, settings):
        settings.APP_ENV_LICENSING_CERT_TTL_SECONDS = 120
        with on_commit():
            license = make_license()
        payload = licenses.read_license(license.id)
        cert_expires_at = datetime.fromisoformat(payload["certExpiresAt"])
        issued_at = datetime.fromisoformat(payload["issuedAt"])
        assert cert_expires_at - issued_at == timedelta(seconds=120)
        assert cert_expires_at <= datetime.now(UTC) + timedelta(seconds=120)
        assert 0 < get_redis_connection("default").ttl(licenses.certificate_cache_key(license.id)) <= 120

    def test_the_payload_is_sealed(self, published):
        enc = licenses.unarmor(cached(published.id))["enc"]
        assert "ACTIVATED" not in enc and str(published.id) not in enc
        opened = json.loads(crypto.decrypt(enc, purpose=licenses.SEAL_PURPOSE))
        assert opened["licenseId"] == str(published.id)

    @pytest.mark.parametrize(
        ("action", "status"),
        [(services.license_suspend, "SUSPENDED"), (services.license_revoke, "REVOKED"), (services.license_renew, "ACTIVATED")],
    )
    def test_actions_republish(self, published, on_commit, action, status):
        get_redis_connection("default").delete(licenses.certificate_cache_key(published.id))
        with on_commit():
            action(license_id=published.id)
        assert licenses.read_license(published.id)["status"] == status

    def test_reinstate_republishes(self, published, on_commit):
        with on_commit():
            services.license_suspend(license_id=published.id)
        assert licenses.read_license(published.id)["status"] == "SUSPENDED"
        with on_commit():
            services.license_reinstate(license_id=published.id)
        assert licenses.read_license(published.id)["status"] == "ACTIVATED"

    def test_patch_does_not_republish(self, published, on_commit):
        before = cached(published.id)
        with on_commit():
            services.license_update(license_id=published.id, name="Renamed", activation_limit=7)
        assert cached(published.id) == before

    def test_expiry_at_validation_republishes(self, make_license, on_commit):
        with on_commit():
            license = make_license(expires_at=timezone.now() - timedelta(seconds=1))
        payload = licenses.read_license(license.id)
        assert payload["status"] == "ACTIVATED"
        assert licenses.license_in_force(payload) is False  # the reader's helper sees the lapsed expiresAt
        with on_commit():
            services.license_validate(license_id=license.id, fingerprint="pos")
        assert licenses.read_license(license.id)["status"] == "EXPIRED"

    def test_delete_withdraws(self, published, on_commit):
        with on_commit():
            services.license_delete(license_id=published.id)
        assert cached(published.id) is None
        assert licenses.read_license(published.id) is None

    def test_a_stale_publisher_cannot_overwrite_a_newer_certificate(self, published, on_commit):
        stale = License.objects.select_related("policy").get(pk=published.id)  # read while ACTIVATED
        with on_commit():
            services.license_revoke(license_id=published.id)
        assert licenses.read_license(published.id)["status"] == "REVOKED"

        assert certificates._publish(stale) is None  # it lost the race: its version is older

        assert licenses.read_license(published.id)["status"] == "REVOKED"

    def test_a_publication_that_failed_after_the_commit_is_retried_by_the_sweep(self, published, on_commit, monkeypatch):
        from redis.exceptions import ConnectionError as RedisConnectionError

        class DownRedis:
            def eval(self, *args):
                raise RedisConnectionError("Redis is down")

        monkeypatch.setattr(certificates, "get_redis_connection", lambda alias: DownRedis())
        with on_commit():
            services.license_suspend(license_id=published.id)
        monkeypatch.undo()
        assert licenses.read_license(published.id)["status"] == "ACTIVATED"  # what a consumer would wrongly trust
        row = License.objects.get(pk=published.id)
        assert row.certificate_published_version < row.certificate_version

        assert certificates.publish_pending_certificates() == 1

        assert licenses.read_license(published.id)["status"] == "SUSPENDED"
        row.refresh_from_db()
        assert row.certificate_published_version == row.certificate_version
        assert certificates.publish_pending_certificates() == 0

    def test_the_sweep_runs_under_beat(self):
        from apps.licensing import tasks
        from merchant_platform.celery import app

        entry = app.conf.beat_schedule["apps.licensing.tasks.publish_pending_certificates"]
        assert entry["task"] == tasks.publish_pending_certificates_task.name

    def test_without_the_signing_key_publication_is_skipped(self, published, on_commit, settings):
        settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY = ""
        assert certificates.signing_problems() == ["APP_ENV_LICENSING_ED25519_PRIVATE_KEY is not set"]
        with on_commit():
            services.license_suspend(license_id=published.id)
        assert cached(published.id) is None  # the stale certificate is withdrawn too: consumers see null
        assert licenses.read_license(published.id) is None

    def test_without_the_application_secret_publication_is_skipped(self, make_license, on_commit, settings):
        settings.APP_ENV_APPLICATION_SECRET = ""
        with on_commit():
            license = make_license()
        assert cached(license.id) is None

    def test_missing_configuration_is_warned_about(self, settings, caplog):
        settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY = ""
        settings.APP_ENV_LICENSING_ED25519_PUBLIC_KEY = ""
        with caplog.at_level("WARNING"):
            certificates.log_configuration_warnings()
        events = " ".join(str(record.msg) for record in caplog.records)
        assert "licensing.certificates_disabled" in events and "licensing.certificates_unverifiable" in events


@pytest.mark.django_db(databases=ALL)
class TestReader:
    """Each way a certificate can be untrustworthy yields None (unknown), never an exception."""

    def test_cache_miss(self):
        assert licenses.read_license(987654321) is None

    def test_expired(self, published):
        assert licenses.read_license(published.id) is not None  # verified once, remembered by this process
        later = datetime.now(UTC) + timedelta(seconds=3601)
        assert licenses.read_license(published.id, now=later) is None  # expiry is checked on every read

    def test_wrong_signature(self, published):
        document = licenses.unarmor(cached(published.id))
        signature = bytearray(base64.b64decode(document["sig"]))
        signature[0] ^= 1
        store(published.id, reforge(cached(published.id), sig=base64.b64encode(bytes(signature)).decode()))
        assert licenses.read_license(published.id) is None

    def test_tampered_payload(self, published):
        document = licenses.unarmor(cached(published.id))
        forged = crypto.encrypt(
            json.dumps({"licenseId": str(published.id), "status": "ACTIVATED", "certExpiresAt": "2999-01-01T00:00:00Z"}),
            purpose=licenses.SEAL_PURPOSE,
        )
        store(published.id, reforge(cached(published.id), enc=forged, sig=document["sig"]))
        assert licenses.read_license(published.id) is None

    def test_unknown_algorithm(self, published):
        store(published.id, reforge(cached(published.id), alg="aes-256-gcm+none"))
        assert licenses.read_license(published.id) is None

    def test_signed_by_another_key(self, published, settings):
        _, other_public = licenses.pem_pair()
        settings.APP_ENV_LICENSING_ED25519_PUBLIC_KEY = other_public
        assert licenses.read_license(published.id) is None

    def test_sealed_under_another_secret(self, published, settings):
        settings.APP_ENV_APPLICATION_SECRET = "another-secret"
        assert licenses.read_license(published.id) is None

    def test_certificate_of_another_license(self, published, make_license, on_commit):
        with on_commit():
            other = make_license()
        store(published.id, cached(other.id))
        assert licenses.read_license(published.id) is None

    def test_garbage(self, published):
        for text in ("", "not a certificate", f"{licenses.BEGIN_MARKER}\n!!!\n{licenses.END_MARKER}"):
            store(published.id, text)
            assert licenses.read_license(published.id) is None

    def test_no_verifying_key(self, published, settings):
        settings.APP_ENV_LICENSING_ED25519_PUBLIC_KEY = ""
        assert licenses.read_license(published.id) is not None  # the signer verifies with its own public half
        settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY = ""
        assert licenses.read_license(published.id) is None

    def test_a_verifier_with_only_the_public_key(self, published, settings):
        settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY = ""
        assert licenses.read_license(published.id)["licenseId"] == str(published.id)

    def test_license_in_force(self):
        assert licenses.license_in_force(None) is None
        assert licenses.license_in_force({"status": "SUSPENDED", "expiresAt": None}) is False
        assert licenses.license_in_force({"status": "ACTIVATED", "expiresAt": None}) is True


@pytest.mark.django_db(databases=ALL, transaction=True)
def test_validation_refreshes_a_missing_certificate_in_the_background(make_license):
    license = make_license()
    get_redis_connection("default").delete(licenses.certificate_cache_key(license.id))
    assert services.license_validate(license_id=license.id, fingerprint="pos").valid
    assert wait_for(lambda: licenses.read_license(license.id))["status"] == "ACTIVATED"
