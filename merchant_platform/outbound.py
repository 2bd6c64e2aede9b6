"""The HTTP client for URLs a merchant supplies (webhook subscribers, payment providers' endpoints):
the server-side request forgery guard.

A merchant's URL must be http(s), carry no credentials, and its host must resolve only to public
addresses: never private, loopback, link-local, shared (CGNAT), multicast, reserved or unspecified
ones, nor an IPv6 form that carries such an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64,
6to4, Teredo), whose connection may end at that IPv4. Each request resolves the host once, checks
every address, and connects to the checked one (the URL's host stays in the Host header, and over
HTTPS in SNI and the certificate check), so a DNS answer that changes in between (rebinding) cannot
aim it elsewhere. Redirects are never followed and nothing comes from the environment (a proxy
would connect to the name, not the checked address; ~/.netrc credentials are not the merchant's).

`allow_private` lifts the address rule: development and tests, where the subscriber or provider
runs on this machine, and URLs the platform itself configured. No library fits (`advocate`, the
known one, is unmaintained since 2020), so the rules are written out here.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from http.cookiejar import DefaultCookiePolicy
from urllib.parse import SplitResult, urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv6 prefixes that carry an IPv4 address in their last 32 bits.
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# RFC 8215 local-use NAT64: a private translator by definition, refused whatever it embeds.
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


class RefusedUrl(ValueError):
    """A URL the guard refuses: its scheme, credentials, a host that does not resolve, or an address
    that is not public."""


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (a connection to it may end there), or []."""
    if address.ipv4_mapped:
        return [address.ipv4_mapped]
    if address.sixtofour:
        return [address.sixtofour]
    if address.teredo:
        return list(address.teredo)  # the Teredo server and the (de-obfuscated) client
    if address in NAT64 or address in IPV4_COMPATIBLE:
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    return []


def is_public(address: IPAddress) -> bool:
    """Whether a merchant's URL may connect to `address`."""
    if address.is_unspecified or address.is_loopback or address.is_link_local or address.is_multicast:
        return False
    if address.version == 6:
        if address in NAT64_LOCAL:
            return False
        carried = embedded_ipv4(address)
        if carried:
            return all(is_public(ipv4) for ipv4 in carried)
    # is_global is False for private, shared (100.64.0.0/10), documentation and other special ranges.
    return address.is_global and not address.is_reserved and not address.is_private


def parse(url: str) -> SplitResult:
    """The URL's parts; RefusedUrl unless it is http(s) with a host and without credentials."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a malformed port)
    except ValueError:
        raise RefusedUrl("The URL does not parse.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedUrl("Only http and https URLs with a host are accepted.")
    if parts.username or parts.password:
        raise RefusedUrl("Credentials in the URL are not accepted.")
    return parts


def _is_loopback_name(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host == "localhost" or host.endswith(".localhost")


def _addresses(parts: SplitResult) -> list[IPAddress]:
    with contextlib.suppress(ValueError):  # not an address literal: a name, resolved below
        return [ipaddress.ip_address(parts.hostname)]
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        raise RefusedUrl("The host does not resolve.") from None
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


def _refuse_non_public(addresses: list[IPAddress]) -> None:
    if not all(is_public(address) for address in addresses):
        raise RefusedUrl("Private, loopback, link-local, shared, multicast and reserved addresses are not accepted.")


def check_url(url: str, *, allow_private: bool = False, resolve: bool = True) -> None:
    """RefusedUrl unless `url` may be requested: what a create or update checks (`resolve=False`
    checks address literals and leaves names to the request, which checks again anyway)."""
    parts = parse(url)
    if allow_private:
        return
    if _is_loopback_name(parts.hostname):
        raise RefusedUrl("Loopback addresses are not accepted.")
    try:
        ipaddress.ip_address(parts.hostname)
    except ValueError:
        if not resolve:
            return
    _refuse_non_public(_addresses(parts))


def connect_address(url: str, *, allow_private: bool = False) -> str:
    """The address a request to `url` connects to: its host resolved once, every answer checked."""
    parts = parse(url)
    if not allow_private and _is_loopback_name(parts.hostname):
        raise RefusedUrl("Loopback addresses are not accepted.")
    addresses = _addresses(parts)
    if not addresses:
        raise RefusedUrl("The host does not resolve.")
    if not allow_private:
        _refuse_non_public(addresses)
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


def new_session(*, retries: int = 0) -> requests.Session:
    """A session for merchants' URLs (use it through `request`): keep-alive, nothing from the
    environment, cookies never kept, `retries` retries of a connection that could not be made."""
    session = requests.Session()
    session.trust_env = False
    session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    # read=False: a read timeout or a lost answer is raised as itself (the request may have arrived).
    retry = Retry(total=retries, connect=retries, read=False, backoff_factor=0.2, allowed_methods=None)
    session.mount("http://", HTTPAdapter(max_retries=retry))
    session.mount("https://", PinnedAdapter(max_retries=retry))
    return session


def request(session: requests.Session, method: str, url: str, *, allow_private: bool = False, **kwargs) -> requests.Response:
    """One request to a merchant's URL through `session` (from `new_session`): RefusedUrl before any
    connection when the guard refuses it; otherwise requests' answer or exception. A redirect is
    answered as it came (never followed)."""
    target, pin_headers = pinned(url, connect_address(url, allow_private=allow_private))
    headers = {**(kwargs.pop("headers", None) or {}), **pin_headers}
    return session.request(method, target, headers=headers, allow_redirects=False, **kwargs)
