"""Outbound webhooks, Standard Webhooks style (spec 5 "Webhook signature"): the headers
`webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">` under the config's `whsec_` secret; the event type is inside the signed
body (`event`) and, unsigned, in the `webhook-event` header. URLs go through the kernel's guard for
merchants' URLs (merchant_platform/outbound.py); a platform service's own webhook (`internal`) may
only target the platform's URLs (PAYMENT_INTERNAL_WEBHOOK_URLS)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass

import requests
from django.conf import settings

from merchant_platform import outbound

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(secret: str, message_id: str, timestamp: int, body: str) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    digest = hmac.new(key, f"{message_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def encode_body(payload: dict) -> str:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


# The settings naming the platform's own webhook receivers: the only URLs a platform service's
# subscription (`internal`) may target, read at each check.
PLATFORM_WEBHOOK_URL_SETTINGS = ("COMMERCE_PAYMENT_WEBHOOK_URL",)


PLATFORM_URL_ONLY = "A platform service's webhook may only target one of the platform's own receivers."


def allow_private(*, internal: bool) -> bool:
    """Whether a webhook's URL may be on a private address: a platform service's own subscription
    (whose URL `is_platform_url` holds to the platform's receivers), or the development switch."""
    return internal or settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS


# What may follow a receiver's URL: one path segment (commerce appends the merchant id), never a
# dot segment, a query or anything that could lead elsewhere on the platform.
RECEIVER_TAIL = re.compile(r"(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)?")


def is_platform_url(url: str) -> bool:
    """Whether `url` is one of the platform's own webhook receivers (or one segment under one)."""
    bases = [getattr(settings, name).rstrip("/") for name in PLATFORM_WEBHOOK_URL_SETTINGS]
    return any(url.startswith(base) and RECEIVER_TAIL.fullmatch(url[len(base) :]) for base in bases)


def check_url(url: str, *, internal: bool, resolve: bool = True) -> None:
    """RefusedUrl unless `url` may receive this webhook: a platform service's (`internal`) only at
    one of the platform's own URLs, a merchant's only at public addresses (outbound's guard)."""
    if internal and not is_platform_url(url):
        raise outbound.RefusedUrl(PLATFORM_URL_ONLY)
    outbound.check_url(url, allow_private=allow_private(internal=internal), resolve=resolve)


@dataclass(frozen=True)
class TryResult:
    ok: bool
    status_code: int | None
    error: str
    latency_ms: int


_local = threading.local()


def _session() -> requests.Session:
    """This thread's keep-alive session (outbound's: no environment, no cookies, no redirects): a
    worker sends many deliveries, mostly to the same few subscribers, so each try reuses a pooled
    connection instead of a new session and handshake (and skips requests' proxy lookups, a third of
    a try's CPU)."""
    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = outbound.new_session()
    return session


def send(*, url: str, secret: str, message_id: str, payload: dict, internal: bool = False) -> TryResult:
    """One signed POST; never raises for the subscriber's failures. The URL is checked again here
    (an internal webhook's against the platform's own URLs, a merchant's by outbound's guard on the
    address it connects to)."""
    started = time.monotonic()
    timestamp = int(time.time())
    body = encode_body(payload)
    headers = {
        "Content-Type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }
    if "event" in payload:
        # The spec names the event type among what is signed: it is inside the signed body, and
        # also here for receivers that route before parsing (docs/services/payment.md).
        headers["webhook-event"] = str(payload["event"])
    try:
        if internal and not is_platform_url(url):
            raise outbound.RefusedUrl(PLATFORM_URL_ONLY)
        response = outbound.request(
            _session(),
            "POST",
            url,
            allow_private=allow_private(internal=internal),
            data=body.encode(),
            headers=headers,
            timeout=(3.05, settings.PAYMENT_WEBHOOK_TIMEOUT_SECONDS),
        )
    except outbound.RefusedUrl as exc:
        return TryResult(False, None, str(exc), 0)
    except requests.Timeout:
        return TryResult(False, None, "timeout", int((time.monotonic() - started) * 1000))
    except requests.RequestException as exc:
        return TryResult(False, None, type(exc).__name__, int((time.monotonic() - started) * 1000))
    latency = int((time.monotonic() - started) * 1000)
    return TryResult(
        200 <= response.status_code < 300, response.status_code, "" if response.ok else f"HTTP {response.status_code}", latency
    )
