"""Payment test helpers: a merchant's provider integrations (Configuration rows with the credential
sealed by the kernel), the fake provider as a real HTTP server, and IPN signatures computed here,
independently of the service code."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import secrets

import pytest

from apps.payment.fake_provider import FakeProvider
from merchant_platform.integrations import seal_credential
from merchant_platform.models import Configuration

BASE = "/v1/api/payment"
IPN_PATHS = {
    "QR": "/api/pay/provider/qr-mms/ipn",
    "PHONE_POS": "/api/pay/provider/phone-pos/ipn",
    "SMART_POS": "/api/pay/provider/smart-pos/ipn",
    "SYSTEM": "/api/pay/system/ipn",
}
_merchants = itertools.count(7_390_000_000_000_000)


def independent_signature(fields: dict, secret: str) -> str:
    """Spec 5, written out again: every field but prov_SecureHash, sorted, name=value joined by &,
    HMAC-SHA512, upper-case hex."""
    message = "&".join(f"{name}={fields[name]}" for name in sorted(fields) if name != "prov_SecureHash")
    return hmac.new(secret.encode(), message.encode(), hashlib.sha512).hexdigest().upper()


def signed(fields: dict, secret: str) -> dict:
    return {**fields, "prov_SecureHash": independent_signature(fields, secret)}


def ipn_fields(attempt: dict, *, amount: int | None = None, code: str = "00") -> dict:
    """The fields of a provider's IPN for `attempt` (paid, unless `code` says otherwise), unsigned."""
    return {
        "prov_TxnRef": attempt["code"],
        "prov_TransactionNo": "14009999",
        "prov_Amount": str((attempt["amount"] if amount is None else amount) * 100),
        "prov_ResponseCode": code,
        "prov_BankCode": "NCB",
        "prov_PayDate": "20261125133000",
    }


def new_merchant_id() -> int:
    return next(_merchants) + secrets.randbelow(10**9)


def add_integration(merchant_id: int, *, channel: str, secret: str, endpoint: str = "") -> Configuration:
    row = Configuration.objects.create(
        group=Configuration.Group.INTEGRATION,
        code=channel,
        environment=Configuration.Environment.SANDBOX,
        principal_type=Configuration.PrincipalType.MERCHANT,
        principal_id=merchant_id,
        settings={"endpoint": endpoint} if endpoint else {},
    )
    row.credential, row.credential_mask = seal_credential(configuration_id=row.id, credential=secret)
    row.save(update_fields=["credential", "credential_mask"])
    return row


@pytest.fixture
def secret() -> str:
    return "prov-" + secrets.token_hex(16)


@pytest.fixture
def provider(secret):
    fake = FakeProvider(secret=secret, retry_interval_seconds=0.2).start()
    yield fake
    fake.stop()


@pytest.fixture
def merchant(provider, secret, settings) -> int:
    """A merchant with integrations for every channel, all on the fake provider (on 127.0.0.1: the
    development switch lets merchants' URLs reach it)."""
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True
    merchant_id = new_merchant_id()
    for channel in IPN_PATHS:
        add_integration(merchant_id, channel=channel, secret=secret, endpoint=provider.url)
    return merchant_id


@pytest.fixture
def admin(make_caller, seeded):
    return make_caller(roles=["ADMIN"]).client()


def open_transaction(client, merchant_id: int, **fields) -> dict:
    body = {"merchantId": str(merchant_id), "sourceId": f"order-{secrets.token_hex(6)}", "amount": 2500, "currency": "EUR", **fields}
    response = client.post(f"{BASE}/transactions", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()
