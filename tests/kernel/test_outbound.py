"""merchant_platform/outbound.py: the address rules for merchants' URLs (each refused form, the IPv4
an IPv6 form carries), one resolution whose checked address is the one connected to, TLS still
naming the host, no redirects followed and no proxy taken from the environment."""

from __future__ import annotations

import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from requests import Request

from merchant_platform import outbound


@pytest.mark.parametrize(
    "address",
    [
        "10.1.2.3",  # private
        "172.16.0.1",
        "192.168.1.1",
        "127.0.0.1",  # loopback
        "127.0.0.2",
        "169.254.169.254",  # link-local (cloud metadata)
        "100.64.0.1",  # shared address space (CGNAT)
        "224.0.0.1",  # multicast
        "239.255.255.250",
        "240.0.0.1",  # reserved
        "255.255.255.255",
        "0.0.0.0",  # unspecified
        "192.0.2.1",  # documentation
        "::1",
        "::",
        "fe80::1",
        "fc00::1",  # unique local
        "ff02::1",  # multicast
        "2001:db8::1",  # documentation
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",  # IPv4-compatible
        "::10.0.0.1",
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::808:808",  # local-use NAT64: refused whatever it carries
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2001:0:a00:1:8000:63bf:3fff:fdd2",  # Teredo, server 10.0.0.1
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    ],
)
def test_non_public_addresses_are_refused(address):
    assert not outbound.is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "2001:4860:4860::8888",
        "::ffff:8.8.8.8",  # IPv4-mapped, NAT64 and 6to4 forms of a public IPv4 reach that IPv4
        "64:ff9b::808:808",
        "2002:808:808::1",
    ],
)
def test_public_addresses_are_accepted(address):
    assert outbound.is_public(ipaddress.ip_address(address))


def test_the_ipv4_an_ipv6_form_carries_is_found():
    carried = {
        "::ffff:10.0.0.1": ["10.0.0.1"],
        "::10.0.0.1": ["10.0.0.1"],
        "64:ff9b::a00:1": ["10.0.0.1"],
        "2002:a00:1::1": ["10.0.0.1"],
        "2001:0:4136:e378:8000:63bf:3fff:fdd2": ["65.54.227.120", "192.0.2.45"],
        "2001:4860:4860::8888": [],
    }
    for address, ipv4s in carried.items():
        assert [str(ipv4) for ipv4 in outbound.embedded_ipv4(ipaddress.IPv6Address(address))] == ipv4s, address


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://[64:ff9b::7f00:1]/x",
        "http://100.64.0.1/x",
        "http://localhost/x",
        "http://api.localhost./x",
        "ftp://example.com/x",
        "http://user:pw@93.184.216.34/",
        "http:///nohost",
        "http://93.184.216.34:99999/x",
    ],
)
def test_check_url_refuses(url):
    with pytest.raises(outbound.RefusedUrl):
        outbound.check_url(url, resolve=False)


def test_allow_private_lifts_the_address_rule_only():
    outbound.check_url("http://127.0.0.1:9/x", allow_private=True)
    with pytest.raises(outbound.RefusedUrl):
        outbound.check_url("ftp://127.0.0.1/x", allow_private=True)


def resolving(monkeypatch, name: str, *answers: str) -> list[str]:
    """`name` resolves to the next of `answers` at each lookup; returns the list of lookups made."""
    resolve, queue, lookups = socket.getaddrinfo, list(answers), []

    def getaddrinfo(host, port, *args, **kwargs):
        if host != name:
            return resolve(host, port, *args, **kwargs)
        lookups.append(host)
        address = queue.pop(0) if len(queue) > 1 else queue[0]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def test_the_address_connected_to_is_the_one_checked(monkeypatch):
    resolving(monkeypatch, "hooks.test", "93.184.216.34", "127.0.0.1")
    address = outbound.connect_address("https://hooks.test/hooks")
    assert address == "93.184.216.34"
    assert outbound.pinned("https://hooks.test/hooks", address) == ("https://93.184.216.34/hooks", {"Host": "hooks.test"})
    assert outbound.pinned("http://hooks.test:8080/h?q=1", "2001:4860::1") == (
        "http://[2001:4860::1]:8080/h?q=1",
        {"Host": "hooks.test:8080"},
    )
    resolving(monkeypatch, "hooks.test", "64:ff9b::7f00:1")
    with pytest.raises(outbound.RefusedUrl):
        outbound.connect_address("https://hooks.test/hooks")


def test_https_to_a_pinned_address_names_the_urls_host_in_tls():
    request = Request("POST", "https://93.184.216.34/hooks", headers={"Host": "hooks.test"}).prepare()
    host_params, pool_kwargs = outbound.PinnedAdapter().build_connection_pool_key_attributes(request, True)
    assert host_params["host"] == "93.184.216.34"
    assert pool_kwargs["server_hostname"] == "hooks.test" and pool_kwargs["assert_hostname"] == "hooks.test"


class Server:
    """A local HTTP server counting requests; each answers a redirect to `location` (or 204)."""

    def __init__(self, location: str = ""):
        self.requests: list[tuple[str, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                return

            def do_GET(self):
                server.requests.append((self.path, dict(self.headers)))
                self.send_response(302 if location else 204)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def server():
    made = Server()
    yield made
    made.close()


def test_a_refused_address_is_never_connected_to(server, monkeypatch):
    lookups = resolving(monkeypatch, "provider.test", "127.0.0.1")
    port = server.http.server_address[1]
    for url in (f"{server.url}/payments", f"http://provider.test:{port}/payments"):
        with pytest.raises(outbound.RefusedUrl):
            outbound.request(outbound.new_session(), "GET", url)
    assert server.requests == [] and lookups == ["provider.test"]


def test_redirects_are_not_followed_and_proxies_not_taken_from_the_environment(server, monkeypatch):
    target = Server(location=f"{server.url}/inside")
    try:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
        answer = outbound.request(outbound.new_session(), "GET", f"{target.url}/start", allow_private=True, timeout=5)
        assert answer.status_code == 302 and answer.headers["Location"] == f"{server.url}/inside"
        assert [path for path, _headers in target.requests] == ["/start"] and server.requests == []
    finally:
        target.close()


def test_one_resolution_per_request_with_the_host_kept(server, monkeypatch):
    port = server.http.server_address[1]
    lookups = resolving(monkeypatch, "provider.test", "127.0.0.1", "10.0.0.1")
    answer = outbound.request(outbound.new_session(), "GET", f"http://provider.test:{port}/p", allow_private=True, timeout=5)
    assert answer.status_code == 204 and lookups == ["provider.test"]
    [(path, headers)] = server.requests
    assert path == "/p" and headers["Host"] == f"provider.test:{port}"
