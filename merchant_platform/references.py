"""Checking a reference to another service's record (docs/security.md, "The tenant boundary").

A service keeps other services' records as plain ids and cannot read their schemas, so when a
request names one (a finance account on a payment, a tax group on a product) the service asks the
owner: it reads the record's single-record route with its own service account and compares the
record's `merchantId` with the merchant the request acts in. A record that does not exist, or is
another merchant's, is the same answer (400 naming the field); an owner that cannot answer is a 503,
and nothing is written.
"""

from __future__ import annotations

import requests

from merchant_platform.errors import InvalidInput, ServiceUnavailable
from merchant_platform.http import session
from merchant_platform.logging import get_logger
from merchant_platform.verification.service_accounts import basic_auth_header

log = get_logger(__name__)


def record_merchant(url: str) -> str | None:
    """The `merchantId` of the record at `url` (another service's single-record route), or None
    when the owner answers 404; ServiceUnavailable when it cannot answer."""
    try:
        with session() as http:
            response = http.get(url, headers={"Authorization": basic_auth_header()})
    except requests.RequestException as exc:
        log.warning("reference.unverifiable", url=url, error=type(exc).__name__)
        raise ServiceUnavailable("The service that owns a record this request names cannot be reached; try again later.") from None
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        log.warning("reference.unverifiable", url=url, status=response.status_code)
        raise ServiceUnavailable("The service that owns a record this request names did not answer; try again later.")
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        log.warning("reference.unverifiable", url=url, status=response.status_code, reason="not a JSON object")
        raise ServiceUnavailable("The service that owns a record this request names answered something else than a record.")
    merchant = body.get("merchantId")
    return None if merchant is None else str(merchant)


def check_owned(*, field: str, url: str, merchant_id: int, what: str) -> None:
    """400 naming `field` unless the record at `url` belongs to `merchant_id`."""
    if record_merchant(url) != str(merchant_id):
        raise InvalidInput({field: f"No {what} with this id belongs to merchant {merchant_id}."})
