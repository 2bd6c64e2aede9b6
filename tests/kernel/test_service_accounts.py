"""Service accounts (docs/authentication.md, "Service accounts"): each calling service presents its
own HTTP Basic account, which may call only the routes and actions it needs; anything else is 403
SERVICE_ACCOUNT_FORBIDDEN, on every route of every service."""

from __future__ import annotations

import base64

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from apps.commerce.sales import clients
from merchant_platform.verification.service_accounts import basic_auth_header

pytestmark = pytest.mark.django_db(databases="__all__")
MERCHANT = "9601"


def as_account(account: str) -> APIClient:
    client = APIClient()
    password = settings.SERVICE_BASIC_AUTH_ACCOUNTS[account]
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(f"{account}:{password}".encode()).decode())
    return client


def call(client: APIClient, method: str, path: str, body: dict | None = None):
    return getattr(client, method)(path, body, format="json") if body is not None else getattr(client, method)(path)


QUOTE = {"merchantId": MERCHANT, "currency": "EUR", "lines": [{"lineId": "1", "productId": "1", "amount": 100}]}
RESERVE = {"orderId": "o-1", "merchantId": MERCHANT, "lines": [], "ttlSeconds": 60}
TRANSACTION = {"merchantId": MERCHANT, "sourceId": "o-1", "amount": 100, "currency": "EUR"}
LEDGER_EXPORT = f"/v1/api/finance/internal/general-ledger?merchantId={MERCHANT}&dateFrom=2025-01-01&dateTo=2025-01-31"
MERCHANT_NAMES = ("get", "/v1/api/commerce/merchants?pageSize=200", None)  # the service's admin shows merchants' names
ADMIN_ACCOUNTS = ("payment", "ledger", "taxation", "finance", "inventory", "licensing", "outreach")

ALLOWED = {
    "commerce": [
        ("post", "/v1/api/inventory/internal/reservations", RESERVE),
        ("post", "/v1/api/inventory/internal/reservations/release", {"orderId": "o-1"}),
        ("post", "/v1/api/taxation/quotes", QUOTE),
        ("get", f"/v1/api/payment/transactions?merchantId={MERCHANT}", None),
        ("post", "/v1/api/payment/transactions", TRANSACTION),
        ("get", "/v1/api/payment/transactions/1", None),
        ("post", "/v1/api/payment/transactions/1/actions/cancel", {}),
        ("post", "/v1/api/payment/transactions/1/refunds", {"merchantId": MERCHANT, "amount": 1, "currency": "EUR", "reason": "r"}),
        ("get", "/v1/api/payment/refunds/1", None),
        ("post", "/v1/api/payment/webhooks", {"merchantId": MERCHANT, "name": "x", "url": "http://x", "eventTypes": []}),
        ("patch", "/v1/api/payment/webhooks/1", {"eventTypes": ["refund.succeeded"]}),  # its subscription, made before refunds
        ("get", "/v1/api/inventory/locations/1", None),  # a refund's restock location, checked with inventory
        ("get", "/v1/api/taxation/tax-groups/1", None),  # a product's tax group, checked with taxation
        ("get", "/v1/api/finance/accounts/1", None),  # a sale order's finance account, checked with finance
    ],
    "payment": [("get", "/v1/api/finance/accounts/1", None), MERCHANT_NAMES],
    "ledger": [("get", LEDGER_EXPORT, None), ("get", "/v1/api/finance/accounts/1", None), MERCHANT_NAMES],
    "taxation": [("get", f"/v1/api/commerce/products?merchantId={MERCHANT}", None), MERCHANT_NAMES],
    **{account: [MERCHANT_NAMES] for account in ("finance", "inventory", "licensing", "outreach")},
}
FORBIDDEN = {
    "commerce": [
        ("get", LEDGER_EXPORT, None),  # another service's route
        ("get", "/v1/api/identity/internal/users", None),
        ("get", "/v1/api/inventory/internal/reservations", None),  # another action of its routes
        ("post", "/v1/api/inventory/internal/reservations/commit", {"orderId": "o-1"}),
        ("delete", "/v1/api/payment/webhooks/1", None),
        ("post", "/v1/api/inventory/locations", {"merchantId": MERCHANT, "name": "x"}),  # it reads locations only
        ("post", "/v1/api/payment/refunds/1/actions/confirm", {}),  # a cash refund is the till's to confirm
        ("post", "/v1/api/taxation/tax-groups", {"merchantId": MERCHANT, "name": "x", "items": []}),
        ("get", "/v1/api/licensing/licenses", None),
        ("post", "/v1/api/finance/accounts", {"merchantId": MERCHANT, "code": "9999", "name": "x", "type": "ASSET", "currency": "EUR"}),
    ],
    "ledger": [
        ("post", "/v1/api/inventory/internal/reservations", RESERVE),
        ("get", "/v1/api/payment/transactions", None),
        ("post", "/v1/api/taxation/quotes", QUOTE),
        ("post", "/v1/api/finance/accounts", {"merchantId": MERCHANT, "code": "9999", "name": "x", "type": "ASSET", "currency": "EUR"}),
    ],
    "payment": [
        ("get", LEDGER_EXPORT, None),
        ("post", "/v1/api/finance/accounts", {"merchantId": MERCHANT, "code": "9999", "name": "x", "type": "ASSET", "currency": "EUR"}),
        ("post", "/v1/api/inventory/internal/reservations", RESERVE),
        ("get", f"/v1/api/commerce/products?merchantId={MERCHANT}", None),
    ],
    "taxation": [
        ("post", "/v1/api/commerce/products", {"merchantId": MERCHANT, "name": "x"}),
        ("delete", "/v1/api/commerce/merchants/1", None),
        ("get", "/v1/api/commerce/integrations", None),
        ("get", LEDGER_EXPORT, None),
    ],
}


@pytest.mark.parametrize(("account", "method", "path", "body"), [(a, *route) for a, routes in ALLOWED.items() for route in routes])
def test_each_account_calls_the_routes_it_needs(account, method, path, body):
    response = call(as_account(account), method, path, body)
    assert response.status_code not in (401, 403), (path, response.content)


@pytest.mark.parametrize(("account", "method", "path", "body"), [(a, *route) for a, routes in FORBIDDEN.items() for route in routes])
def test_each_account_gets_403_elsewhere(account, method, path, body):
    response = call(as_account(account), method, path, body)
    assert (response.status_code, response.json()["code"]) == (403, "SERVICE_ACCOUNT_FORBIDDEN"), (path, response.content)


def test_the_accounts_are_the_calling_services_own():
    assert set(settings.SERVICE_ACCOUNT_PERMISSIONS) - {settings.SERVICE_BASIC_AUTH_USER} == {"commerce", *ADMIN_ACCOUNTS}
    assert len({settings.SERVICE_BASIC_AUTH_ACCOUNTS[a] for a in ("commerce", *ADMIN_ACCOUNTS)}) == 8


def test_the_kernel_client_presents_the_calling_services_account(live_server, settings):
    """Commerce's saga client calls taxation as `commerce`, even in the all-in-one process."""
    settings.COMMERCE_TAXATION_URL = f"{live_server.url}/v1/api/taxation"
    expected = "Basic " + base64.b64encode(f"commerce:{settings.SERVICE_BASIC_AUTH_CREDENTIALS['commerce']}".encode()).decode()
    sent = []
    session = clients._session()
    session.hooks["response"].append(lambda response, *args, **kwargs: sent.append(response.request.headers["Authorization"]))
    try:
        with pytest.raises(clients.Refused):  # taxation answers (a 4xx about the quote), not 401/403
            clients.quote(merchant_id=int(MERCHANT), currency="EUR", lines=[])
    finally:
        session.hooks["response"].clear()
    assert sent == [expected]
    assert basic_auth_header() == "Basic " + base64.b64encode(b"platform:test-only-service-password").decode()
