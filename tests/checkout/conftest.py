from __future__ import annotations

import secrets

import pytest

from apps.payment.fake_provider import FakeProvider


@pytest.fixture(scope="module")
def provider():
    """The payment provider the merchants' QR integration points at: QR payloads and signed IPNs."""
    fake = FakeProvider(secret="prov-" + secrets.token_hex(16), retry_interval_seconds=0.5).start()
    yield fake
    fake.stop()
