"""Signal's two routers (spec 1.5) in both nginx configurations (deploy/nginx): REST under
/v1/api/signal with a rate limit and security headers, /stream to the ASGI server with no limit,
no buffering and long timeouts; an encrypted session runs through each. And the health check of
signal (spec 8) in deploy/compose.yaml, run against a real server."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pytest
import requests
import yaml

from merchant_platform.management.commands.serve import render_gateway_config
from tests.signal.conftest import PORTS, stream_client
from tests.support.auth import make_caller
from tests.support.deploy import COMPOSE
from tests.support.ports import answers_http, free_port
from tests.support.waiting import wait_for
from tests.tooling.test_gateway import nginx_argv, render_split_config

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow]


@pytest.fixture(params=["all-in-one", "split"])
def gateway(request, stream_servers, rest_upstream, tmp_path):
    """nginx in front of a signal replica (/stream); REST goes to a stand-in WSGI server, so the
    gateway's policies (headers, 429) show without one."""
    (replica,) = stream_servers(1)
    listen, rest, stream = free_port(PORTS), rest_upstream, urlparse(replica).port
    if request.param == "all-in-one":
        config = render_gateway_config(
            directory=tmp_path, listen=f"127.0.0.1:{listen}", wsgi=f"127.0.0.1:{rest}", asgi=f"127.0.0.1:{stream}"
        )
    else:
        config = render_split_config(tmp_path, listen_port=listen, rest_port=rest, stream_port=stream)
    process = subprocess.Popen(nginx_argv(config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: answers_http(listen), timeout=20, message="nginx")
        yield listen
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_rest_is_rate_limited_with_security_headers_and_stream_is_not_limited(gateway):
    base = f"http://127.0.0.1:{gateway}"
    first = requests.get(f"{base}/v1/api/signal/health", timeout=10)
    assert first.headers["X-Frame-Options"] == "DENY"
    assert first.headers["X-Content-Type-Options"] == "nosniff"
    assert first.headers["Strict-Transport-Security"].startswith("max-age=")

    with requests.Session() as session, ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: session.get(f"{base}/v1/api/signal/health", timeout=10), range(400)))
    limited = [response for response in statuses if response.status_code == 429]
    assert limited, "the REST router never limited"
    assert limited[0].headers["Content-Type"] == "application/problem+json" and limited[0].json()["code"] == "RATE_LIMITED"
    assert limited[0].headers["Retry-After"] == "1"

    # Right after, from the same address, sockets open and talk: /stream has no limit.
    caller = make_caller()
    for _ in range(5):
        with stream_client(f"ws://127.0.0.1:{gateway}/stream", caller.token) as client:
            assert client.receive()["event"] == "subscribed"
            client.send({"event": "ping"})
            assert client.receive() == {"event": "pong"}
    bare = requests.get(f"{base}/stream", timeout=10)  # no upgrade: answered by the ASGI server itself
    assert "Strict-Transport-Security" not in bare.headers and bare.status_code != 429


def test_composes_health_checks_pass_while_signals_servers_answer_and_fail_when_one_does_not(stream_servers):
    """Compose's probe commands, run as Docker runs them in the container but with the container's
    ports (3000 REST, 3001 /stream's server) pointed at a replica or at a closed port."""
    (replica,) = stream_servers(1)
    answering, closed = urlparse(replica).port, free_port()
    compose = yaml.safe_load(COMPOSE.read_text())
    signal_check, web_check = compose["services"]["signal"]["healthcheck"]["test"], compose["x-healthcheck"]["test"]

    def exit_status(check: list[str], ports: dict[str, int]) -> int:
        code = check[3]
        for container_port, port in ports.items():
            code = code.replace(container_port, str(port))
        return subprocess.run([sys.executable, check[2], code], capture_output=True, timeout=60, check=False).returncode

    assert exit_status(signal_check, {"3000": answering, "3001": answering}) == 0
    assert exit_status(web_check, {"3000": answering}) == 0
    assert exit_status(signal_check, {"3000": closed, "3001": answering}) != 0
    assert exit_status(signal_check, {"3000": answering, "3001": closed}) != 0
    assert exit_status(web_check, {"3000": closed}) != 0
