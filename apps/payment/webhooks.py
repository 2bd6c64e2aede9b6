"""Outbound webhooks, Standard Webhooks style (spec 5 "Webhook signature"): the headers
`webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">` under the config's `whsec_` secret; the event type is inside the signed
body (`event`). Plus the outbound-URL guard (http(s) only; no private, loopback, link-local or
reserved address unless PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS, or the webhook is a platform service's own)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from http.cookiejar import DefaultCookiePolicy
from urllib.parse import urlsplit

import requests
from django.conf import settings

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(secret: str, message_id: str, timestamp: int, body: str) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    digest = hmac.new(key, f"{message_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def encode_body(payload: dict) -> str:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


class UnsafeUrl(ValueError):
    """A webhook URL the SSRF guard refuses (scheme, private or loopback address)."""


def check_url(url: str, *, resolve: bool = True, internal: bool = False) -> None:
    """Raise UnsafeUrl unless `url` is http(s) to a public address (or private ones are allowed:
    by settings, or for an `internal` webhook, one a platform service made)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeUrl("Only http and https URLs with a host are accepted.")
    if parts.username or parts.password:
        raise UnsafeUrl("Credentials in the URL are not accepted.")
    if internal or settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS:
        return
    host = parts.hostname
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        if host.lower() == "localhost" or host.lower().endswith(".localhost"):
            raise UnsafeUrl("Loopback addresses are not accepted.") from None
        if not resolve:
            return
        try:
            infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80), proto=socket.IPPROTO_TCP)
        except OSError:
            raise UnsafeUrl("The host does not resolve.") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    for address in addresses:
        if not address.is_global or address.is_multicast:
            raise UnsafeUrl("Private, loopback, link-local and reserved addresses are not accepted.")


@dataclass(frozen=True)
class TryResult:
    ok: bool
    status_code: int | None
    error: str
    latency_ms: int


_local = threading.local()


def _session() -> requests.Session:
    """This thread's keep-alive session: a worker sends many deliveries, mostly to the same few
    subscribers, so each try reuses a pooled connection instead of a new session and handshake.
    Cookies a subscriber sets are never kept."""
    session = getattr(_local, "session", None)
    if session is None:
        session = requests.Session()
        session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        _local.session = session
    return session


def send(*, url: str, secret: str, message_id: str, payload: dict, internal: bool = False) -> TryResult:
    """One signed POST; never raises for the subscriber's failures."""
    started = time.monotonic()
    try:
        check_url(url, internal=internal)
    except UnsafeUrl as exc:
        return TryResult(False, None, str(exc), 0)
    timestamp = int(time.time())
    body = encode_body(payload)
    headers = {
        "Content-Type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }
    try:
        response = _session().post(
            url, data=body.encode(), headers=headers, timeout=(3.05, settings.PAYMENT_WEBHOOK_TIMEOUT_SECONDS), allow_redirects=False
        )
    except requests.Timeout:
        return TryResult(False, None, "timeout", int((time.monotonic() - started) * 1000))
    except requests.RequestException as exc:
        return TryResult(False, None, type(exc).__name__, int((time.monotonic() - started) * 1000))
    latency = int((time.monotonic() - started) * 1000)
    return TryResult(
        200 <= response.status_code < 300, response.status_code, "" if response.ok else f"HTTP {response.status_code}", latency
    )
