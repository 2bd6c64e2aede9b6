"""Fixtures of the signal tests: notifications, and signal
replicas (uvicorn processes serving /stream) whose verifier fetches a key set holding the test
signing key."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings

from apps.signal import services
from apps.signal.client import StreamClient
from tests.support.ports import answers, free_port
from tests.support.processes import Process, child_environment
from tests.support.waiting import wait_for

SERVER_OPTIONS = ("--ws", "websockets", "--log-level", "warning")
NOTIFICATIONS = "/v1/api/signal/notifications"


def notify(recipient_id: int, topic: str = "order.paid", **fields):
    """A stored notification, as the activity consumer stores one."""
    return services.notification_store(recipient_id=recipient_id, topic=topic, **fields)


PORTS = range(18300, 18400)  # the signal area's replicas and gateways


@pytest.fixture(scope="session")
def rest_upstream():
    """The port of a stand-in for signal's WSGI server behind a gateway: every GET answers 200 with
    an empty JSON object, so what the gateway's REST router adds (its headers, its rate limit) shows
    on a proxied answer without a WSGI server."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            """No access log on stderr."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def start_replica(env: dict[str, str], log_path, **overrides) -> tuple[Process, str]:
    """One signal replica (the ASGI application in split mode, APP_SERVICE=signal) in its own
    uvicorn process; its /stream URL once it accepts connections."""
    port = free_port(PORTS)
    process = Process(
        [sys.executable, "-m", "uvicorn", "merchant_platform.asgi:application", "--host", "127.0.0.1", f"--port={port}", *SERVER_OPTIONS],
        {**env, "APP_SERVICE": "signal", **overrides},
        log_path / f"signal-{port}.log",
    )
    try:
        wait_for(lambda: answers(port) or process.popen.poll() is not None, timeout=60, message=f"signal replica on {port}")
    except AssertionError:
        process.stop()
        raise
    assert process.popen.poll() is None, process.output
    return process, f"ws://127.0.0.1:{port}/stream"


@pytest.fixture(scope="module")
def stream_url(django_db_setup, django_db_blocker, jwks_url, tmp_path_factory):
    """One replica shared by a module's tests."""
    process, url = start_replica(child_environment(IDENTITY_JWKS_URL=jwks_url), tmp_path_factory.mktemp("signal"))
    yield url
    process.stop()


@pytest.fixture
def stream_servers(subprocess_env, jwks_url, tmp_path):
    """`start(count, **env)`: replicas of this test only (stopped at its end); their URLs."""
    started: list[Process] = []

    def start(count: int = 1, **overrides) -> list[str]:
        urls = []
        for _ in range(count):
            process, url = start_replica(subprocess_env(IDENTITY_JWKS_URL=jwks_url), tmp_path, **overrides)
            started.append(process)
            urls.append(url)
        return urls

    yield start
    for process in started:
        process.stop()


def stream_client(url: str, token: str, **options) -> StreamClient:
    return StreamClient(url, token, info=settings.APP_ENV_WEBSOCKET_ECDH_INFO, **options)
