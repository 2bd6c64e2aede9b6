"""The browser client (apps/signal/static/signal/stream-client.js: WebCrypto ECDH P-256, HKDF,
AES-GCM) speaking to a real signal replica through the gateway's /stream router (deploy/nginx/
split.conf, spec 1.5), and the REST router's security headers: in real headless Chromium (the
DevTools protocol) and under Node, whose `crypto.subtle` and `WebSocket` are the browser APIs. The
client authenticates, subscribes, and decrypts a notification published by a Kafka message."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import uuid
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests
from django.conf import settings
from websockets.sync.client import connect

from apps.signal.consumers import ACTIVITY_CONSUMER
from merchant_platform.messaging.registry import ConsumerSpec, registered_consumers
from merchant_platform.messaging.runner import ConsumerRunner
from tests.signal.conftest import PORTS
from tests.support.auth import make_caller, mint_token, random_user_id
from tests.support.broker import produce, unique
from tests.support.ports import answers_http, free_port
from tests.support.waiting import wait_for
from tests.tooling.test_gateway import nginx_argv, render_split_config

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "apps" / "signal" / "static" / "signal" / "stream-client.js"
RUNNER = Path(__file__).parent / "js" / "run_client.cjs"
NODE = shutil.which("node")


@pytest.fixture
def gateway(stream_servers, rest_upstream, tmp_path):
    """nginx with the split config: /stream to a signal replica, REST to the WSGI server (here a
    stand-in: the REST checks below only read the headers the gateway adds)."""
    (replica,) = stream_servers(1)
    listen = free_port(PORTS)
    config = render_split_config(tmp_path, listen_port=listen, rest_port=rest_upstream, stream_port=urlparse(replica).port)
    process = subprocess.Popen(nginx_argv(config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: answers_http(listen), timeout=20, message="nginx")
        yield f"127.0.0.1:{listen}"
    finally:
        process.terminate()
        process.wait(timeout=10)


class NodeClient:
    def __init__(self, url: str, token: str, *, info: str, room: str | None = None):
        command = [NODE, "--experimental-websocket", "--no-warnings", str(RUNNER), str(CLIENT), url, token, info]
        self.process = subprocess.Popen([*command, *([room] if room else [])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(json.loads(line))

    def wait(self, predicate, message: str, timeout: float = 20.0) -> dict:
        return wait_for(lambda: next((line for line in self.lines if predicate(line)), None), timeout=timeout, message=message)

    def stop(self):
        self.process.kill()
        self.process.wait(timeout=10)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_browser_client_decrypts_a_kafka_notification_through_the_gateway(gateway, make_topic, raw_producer):
    merchant = 100_000 + uuid.uuid4().int % 1_000_000  # a room with no history yet
    room = f"merchant.{merchant}"
    caller = make_caller(merchants=[merchant])
    topic = make_topic()
    (registered,) = registered_consumers(names={ACTIVITY_CONSUMER})
    spec = ConsumerSpec(**{**registered.__dict__, "topics": (topic,), "group_id": unique("signal-test")})
    stop = threading.Event()
    runner = threading.Thread(target=ConsumerRunner(spec, stop).run, daemon=True)
    runner.start()
    client = NodeClient(f"ws://{gateway}/stream", caller.token, info=settings.APP_ENV_WEBSOCKET_ECDH_INFO, room=room)
    try:
        client.wait(lambda line: line.get("ready"), "the client to connect and subscribe")
        assert {"event": "subscribed", "room": room, "offset": 0} in client.lines
        text = f"Order {uuid.uuid4().hex[:8]} was paid."
        produce(raw_producer, topic, [{"recipientId": str(caller.user_id), "topic": "order.paid", "room": room, "body": text}])
        delivered = [
            client.wait(
                lambda line, target=target: line.get("room") == target and line.get("event") == "message", f"the message in {target}"
            )
            for target in (f"user.{caller.user_id}", room)
        ]
    finally:
        client.stop()
        stop.set()
        runner.join(timeout=30)
    for message in delivered:
        assert message["name"] == "notification" and message["payload"]["body"] == text


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_browser_client_is_refused_an_expired_token_and_a_foreign_room(gateway):
    now = int(time.time())
    expired = NodeClient(f"ws://{gateway}/stream", mint_token(random_user_id(), exp=now - 120, iat=now - 900, nbf=0), info="x")
    stranger = NodeClient(
        f"ws://{gateway}/stream", mint_token(random_user_id()), info=settings.APP_ENV_WEBSOCKET_ECDH_INFO, room="merchant.991"
    )
    wrong_info = NodeClient(f"ws://{gateway}/stream", mint_token(random_user_id()), info="another-info")
    try:
        assert expired.wait(lambda line: "refused" in line, "the refusal") == {"refused": "TOKEN_EXPIRED"}
        assert stranger.wait(lambda line: "subscribeRefused" in line, "the room refusal") == {"subscribeRefused": "ROOM_FORBIDDEN"}
        # Another info derives another key: the first encrypted frame does not open, the client closes.
        assert wrong_info.wait(lambda line: "closed" in line, "the close")["error"] == "DECRYPT_FAILED"
    finally:
        for client in (expired, stranger, wrong_info):
            client.stop()


def test_the_rest_router_adds_the_security_headers_and_the_stream_router_does_not(gateway):
    rest = requests.get(f"http://{gateway}/v1/api/signal/health", timeout=10)
    assert rest.headers["X-Frame-Options"] == "DENY" and rest.headers["Strict-Transport-Security"].startswith("max-age=")
    stream = requests.get(f"http://{gateway}/stream", timeout=10)  # no upgrade: the ASGI server answers itself
    assert "Strict-Transport-Security" not in stream.headers


CHROMIUM = shutil.which("chromium")


class Chromium:
    """Headless Chromium driven over the DevTools protocol (no Playwright needed)."""

    def __init__(self, profile: Path):
        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        browser_url = None
        deadline = time.monotonic() + 60
        while browser_url is None and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if "DevTools listening on " in line:
                browser_url = line.split("DevTools listening on ", 1)[1].strip()
        assert browser_url, "chromium did not start"
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()  # keep draining
        port = urlparse(browser_url).port
        page = next(target for target in requests.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json() if target["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=2**24, legacy=True)
        self.next_id = 0

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def close(self):
        self.ws.close()
        self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture
def static_site(tmp_path):
    """The browser client's directory served over HTTP, so the page has a real origin."""
    handler = partial(SimpleHTTPRequestHandler, directory=str(CLIENT.parent))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", free_port(PORTS)), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/lib/packages.sh installs it)")
def test_headless_chromium_decrypts_a_kafka_notification_through_the_gateway(
    stream_servers, static_site, tmp_path, make_topic, raw_producer
):
    (replica,) = stream_servers(1, SIGNAL_ALLOWED_ORIGINS=static_site)
    listen = free_port(PORTS)
    config = render_split_config(tmp_path, listen_port=listen, rest_port=free_port(PORTS), stream_port=urlparse(replica).port)
    nginx = subprocess.Popen(nginx_argv(config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    merchant = 100_000 + uuid.uuid4().int % 1_000_000
    caller, topic = make_caller(merchants=[merchant]), make_topic()
    (registered,) = registered_consumers(names={ACTIVITY_CONSUMER})
    spec = ConsumerSpec(**{**registered.__dict__, "topics": (topic,), "group_id": unique("signal-test")})
    stop = threading.Event()
    runner = threading.Thread(target=ConsumerRunner(spec, stop).run, daemon=True)
    runner.start()
    browser = Chromium(tmp_path / "profile")
    try:
        wait_for(lambda: answers_http(listen), timeout=20, message="nginx")
        browser.call("Page.enable")
        browser.call("Page.navigate", url=f"{static_site}/demo.html")
        wait_for(lambda: browser.evaluate("typeof SignalStream") == "function", message="the demo page and its client")
        subscribed = browser.evaluate(
            f"""(async () => {{
                window.received = [];
                window.stream = new SignalStream("ws://127.0.0.1:{listen}/stream", {json.dumps(caller.token)}, {{
                    info: {json.dumps(settings.APP_ENV_WEBSOCKET_ECDH_INFO)},
                    onMessage: (message) => window.received.push(message),
                }});
                await window.stream.connect();
                return await window.stream.subscribe("merchant.{merchant}");
            }})()"""
        )
        assert subscribed == {"event": "subscribed", "room": f"merchant.{merchant}", "offset": 0}
        text = f"Order {uuid.uuid4().hex[:8]} was paid."
        produce(
            raw_producer, topic, [{"recipientId": str(caller.user_id), "topic": "order.paid", "room": f"merchant.{merchant}", "body": text}]
        )
        wait_for(lambda: browser.evaluate("window.received.length") >= 2, message="two decrypted messages in the page")
        received = browser.evaluate("window.received")
    finally:
        browser.close()
        nginx.terminate()
        nginx.wait(timeout=10)
        stop.set()
        runner.join(timeout=30)
    assert sorted(message["room"] for message in received) == sorted([f"user.{caller.user_id}", f"merchant.{merchant}"])
    assert {message["payload"]["body"] for message in received} == {text}
