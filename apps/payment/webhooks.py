"""Outbound webhooks, Standard Webhooks style (spec 5 "Webhook signature"): the headers
`webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">` under the config's `whsec_` secret; the event type is inside the signed
body (`event`). Plus the outbound-URL guard (http(s) only; no private, loopback, link-local or
reserved address unless PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS, or the webhook is a platform service's own)."""

from __future__ import annotations

import base64
import contextlib
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
from urllib.parse import urlsplit, urlunsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter

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


def _parts(url: str):
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeUrl("Only http and https URLs with a host are accepted.")
    if parts.username or parts.password:
        raise UnsafeUrl("Credentials in the URL are not accepted.")
    return parts


def _private_allowed(internal: bool) -> bool:
    return internal or settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS


def _loopback_name(host: str) -> bool:
    return host.lower() == "localhost" or host.lower().endswith(".localhost")


def _resolve(parts) -> list:
    with contextlib.suppress(ValueError):  # not an address literal: a name, resolved below
        return [ipaddress.ip_address(parts.hostname)]
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), proto=socket.IPPROTO_TCP)
    except OSError:
        raise UnsafeUrl("The host does not resolve.") from None
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


def _refuse_private(addresses: list) -> None:
    for address in addresses:
        if not address.is_global or address.is_multicast:
            raise UnsafeUrl("Private, loopback, link-local and reserved addresses are not accepted.")


def check_url(url: str, *, resolve: bool = True, internal: bool = False) -> None:
    """Raise UnsafeUrl unless `url` is http(s) to a public address (or private ones are allowed:
    by settings, or for an `internal` webhook, one a platform service made)."""
    parts = _parts(url)
    if _private_allowed(internal):
        return
    if _loopback_name(parts.hostname):
        raise UnsafeUrl("Loopback addresses are not accepted.")
    try:
        ipaddress.ip_address(parts.hostname)
    except ValueError:
        if not resolve:
            return
    _refuse_private(_resolve(parts))


def connect_address(url: str, *, internal: bool = False) -> str:
    """The address a delivery to `url` connects to: the host resolved once here and checked by the
    guard (unless private addresses are allowed), so a DNS answer that changes between the check
    and the connection (rebinding) cannot send the request to a private address."""
    parts = _parts(url)
    if not _private_allowed(internal) and _loopback_name(parts.hostname):
        raise UnsafeUrl("Loopback addresses are not accepted.")
    addresses = _resolve(parts)
    if not _private_allowed(internal):
        _refuse_private(addresses)
    return str(addresses[0])


def pinned(url: str, address: str) -> tuple[str, dict[str, str]]:
    """`url` with its host replaced by `address`, and the Host header naming the original host
    (PinnedAdapter keeps that name for TLS: SNI and the certificate check)."""
    parts = urlsplit(url)
    if parts.hostname == address:
        return url, {}
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), {"Host": parts.netloc}


class PinnedAdapter(HTTPAdapter):
    """HTTPS to a URL whose host was replaced by its checked address (`pinned`): the TLS handshake
    still sends and verifies the original host name, taken from the Host header."""

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        host = request.headers.get("Host")
        if host_params["scheme"] == "https" and host:
            name = urlsplit(f"//{host}").hostname
            pool_kwargs["server_hostname"] = name
            pool_kwargs["assert_hostname"] = name
        return host_params, pool_kwargs


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
    Cookies a subscriber sets are never kept, and nothing comes from the environment: a proxy would
    connect to the name, not the address the guard checked, and ~/.netrc credentials are not the
    subscriber's to receive (it also spares each try requests' proxy lookups, a third of its CPU)."""
    session = getattr(_local, "session", None)
    if session is None:
        session = requests.Session()
        session.trust_env = False
        session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        session.mount("https://", PinnedAdapter())
        _local.session = session
    return session


def send(*, url: str, secret: str, message_id: str, payload: dict, internal: bool = False) -> TryResult:
    """One signed POST; never raises for the subscriber's failures."""
    started = time.monotonic()
    try:
        target, pin_headers = pinned(url, connect_address(url, internal=internal))
    except UnsafeUrl as exc:
        return TryResult(False, None, str(exc), 0)
    timestamp = int(time.time())
    body = encode_body(payload)
    headers = {
        "Content-Type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
        **pin_headers,
    }
    try:
        response = _session().post(
            target, data=body.encode(), headers=headers, timeout=(3.05, settings.PAYMENT_WEBHOOK_TIMEOUT_SECONDS), allow_redirects=False
        )
    except requests.Timeout:
        return TryResult(False, None, "timeout", int((time.monotonic() - started) * 1000))
    except requests.RequestException as exc:
        return TryResult(False, None, type(exc).__name__, int((time.monotonic() - started) * 1000))
    latency = int((time.monotonic() - started) * 1000)
    return TryResult(
        200 <= response.status_code < 300, response.status_code, "" if response.ok else f"HTTP {response.status_code}", latency
    )
