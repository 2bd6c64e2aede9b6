"""Commerce's calls to inventory, taxation and payment (HTTP Basic, spec 5), through the gateway by
default (COMMERCE_*_URL). A refusal (a 4xx problem document) raises `Refused` with the sibling's
status and code; anything that is not an answer (connection refused, timeout, 5xx, a body that is not
JSON, our credentials refused) raises `Unavailable`: the saga maps them to 409 and 503."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import requests
from django.conf import settings

from merchant_platform import http
from merchant_platform.logging import get_logger
from merchant_platform.verification.service_accounts import basic_auth_header

log = get_logger(__name__)
TIMEOUT = (3.05, 10)
_local = threading.local()


class Unavailable(Exception):
    def __init__(self, service: str, detail: str):
        super().__init__(f"{service}: {detail}")
        self.service = service
        self.detail = detail


@dataclass
class Refused(Exception):
    service: str
    status: int
    code: str
    body: dict = field(default_factory=dict)


def _session() -> requests.Session:
    # One keep-alive session per thread: a placing makes several calls to the same gateway.
    if getattr(_local, "session", None) is None:
        _local.session = http.session(retries=1)
    return _local.session


def call(service: str, method: str, path: str, *, json: dict | None = None, params: dict | None = None, headers: dict | None = None):
    base = {
        "inventory": settings.COMMERCE_INVENTORY_URL,
        "taxation": settings.COMMERCE_TAXATION_URL,
        "payment": settings.COMMERCE_PAYMENT_URL,
    }[service]
    try:
        response = _session().request(
            method,
            base + path,
            json=json,
            params=params,
            headers={"Authorization": basic_auth_header(), **(headers or {})},
            timeout=TIMEOUT,
        )
    except requests.RequestException as exc:
        raise Unavailable(service, type(exc).__name__) from None
    try:
        body = response.json() if response.content else {}
    except ValueError:
        raise Unavailable(service, f"HTTP {response.status_code} without JSON") from None
    if response.status_code in (401, 403):
        log.error("commerce.sibling_refused_credentials", service=service, status=response.status_code, path=path)
        raise Unavailable(service, f"HTTP {response.status_code}")
    if response.status_code >= 500:
        raise Unavailable(service, f"HTTP {response.status_code}")
    if response.status_code >= 400:
        problem = body if isinstance(body, dict) else {}
        raise Refused(service, response.status_code, str(problem.get("code") or "REFUSED"), problem)
    return body


# --- inventory ------------------------------------------------------------------------------------


def reserve(*, reference: str, merchant_id: int, lines: list[dict], ttl_seconds: int) -> list[dict]:
    return call(
        "inventory",
        "POST",
        "/internal/reservations",
        json={"orderId": reference, "merchantId": str(merchant_id), "lines": lines, "ttlSeconds": ttl_seconds},
    )


def release(*, reference: str) -> list[dict]:
    return call("inventory", "POST", "/internal/reservations/release", json={"orderId": reference})


# --- taxation -------------------------------------------------------------------------------------


def quote(*, merchant_id: int, currency: str, lines: list[dict]) -> dict:
    return call("taxation", "POST", "/quotes", json={"merchantId": str(merchant_id), "currency": currency, "lines": lines})


# --- payment --------------------------------------------------------------------------------------


def open_transaction(body: dict) -> dict:
    return call("payment", "POST", "/transactions", json=body)


def transactions_of(*, merchant_id: int, source_id: str) -> list[dict]:
    page = call("payment", "GET", "/transactions", params={"merchantId": str(merchant_id), "sourceId": source_id})
    return page.get("results", []) if isinstance(page, dict) else []


def transaction(*, transaction_id: int) -> dict:
    return call("payment", "GET", f"/transactions/{transaction_id}")


def cancel_transaction(*, transaction_id: int) -> dict:
    return call("payment", "POST", f"/transactions/{transaction_id}/actions/cancel")


def refund_transaction(*, transaction_id: int, key: str, body: dict) -> dict:
    """A refund of an ORDER transaction, once per `key` (payment replays the refund for a key it
    has seen: the answer is the refund as it is now)."""
    return call("payment", "POST", f"/transactions/{transaction_id}/refunds", json=body, headers={"Idempotency-Key": key})


def refund(*, refund_id: int) -> dict:
    return call("payment", "GET", f"/refunds/{refund_id}")


# What the sale side follows: settlements, cancellations and expiries of its orders' transactions,
# and the outcome of its refunds.
EVENT_TYPES = ["transaction.settled", "transaction.cancelled", "attempt.expired", "refund.succeeded", "refund.failed"]


def subscribe(*, merchant_id: int, url: str) -> dict:
    """A webhook config at payment for the sale side's events; its answer holds the secret (once)."""
    return call(
        "payment",
        "POST",
        "/webhooks",
        json={"merchantId": str(merchant_id), "name": "commerce sale orders", "url": url, "eventTypes": EVENT_TYPES},
    )


def resubscribe(*, webhook_id: int) -> dict:
    """The sale side's webhook config at payment asks for EVENT_TYPES (one made before refunds)."""
    return call("payment", "PATCH", f"/webhooks/{webhook_id}", json={"eventTypes": EVENT_TYPES})
