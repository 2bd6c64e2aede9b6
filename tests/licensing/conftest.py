"""Fixtures of licensing's tests: a fresh Ed25519 signing key per test, the seeds, a clean
certificate cache, and short background flushes so tests observe lastValidatedAt quickly."""

from __future__ import annotations

import pytest
from django_redis import get_redis_connection

from apps.licensing import services
from merchant_platform import licenses


@pytest.fixture(autouse=True)
def signing_keys(settings):
    private, public = licenses.pem_pair()
    settings.APP_ENV_LICENSING_ED25519_PRIVATE_KEY = private
    settings.APP_ENV_LICENSING_ED25519_PUBLIC_KEY = public
    settings.LICENSING_LAST_VALIDATED_FLUSH_SECONDS = 0.02
    return private, public


@pytest.fixture(autouse=True)
def clean_certificate_cache():
    redis = get_redis_connection("default")
    keys = list(redis.scan_iter(licenses.CACHE_KEY.format(license_id="*")))
    if keys:
        redis.delete(*keys)


@pytest.fixture
def on_commit(django_capture_on_commit_callbacks):
    """Run licensing's on-commit callbacks (certificate publication) inside an atomic test."""
    return lambda: django_capture_on_commit_callbacks(using="licensing", execute=True)


@pytest.fixture
def make_license(seeded):
    def make(*, activate: bool = True, limit: int = 2, **fields):
        license = services.license_create(owner_id=fields.pop("owner_id", 4242), activation_limit=limit, **fields)
        if activate:
            license = services.license_activate(license_id=license.id)
        return license

    return make
