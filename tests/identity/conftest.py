"""Fixtures of the identity and auth tests: a real SMTP server (aiosmtpd), a fake SMS provider
speaking its HTTP protocol, a key directory of the test's own, and helpers to call the API."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from dataclasses import dataclass, field
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connections
from django.utils import timezone
from django_redis import get_redis_connection

from apps.identity import guard, otp
from apps.identity.models import User
from merchant_platform.celery import app as celery_app
from merchant_platform.verification.jwks import jwks_cache
from tests.support.ports import free_port
from tests.support.waiting import patience

API = "/v1/api/identity"
PASSWORD = "correct horse battery staple"
CODE_PATTERN = re.compile(r"\b(\d{6})\b")


@pytest.fixture
def policy_urls(settings, db):
    """Route through tests.identity.urls: the platform's routes plus the policy test views (with the
    database: verifying a token may read the user's "valid after" instant, merchant_platform.revocation)."""
    settings.ROOT_URLCONF = "tests.identity.urls"


@pytest.fixture(autouse=True)
def light_argon2(settings, request):
    """Cheaper argon2 for speed; tests of the production parameters ask for `production_argon2`."""
    if "production_argon2" not in request.fixturenames:
        settings.IDENTITY_ARGON2_TIME_COST = 1
        settings.IDENTITY_ARGON2_MEMORY_COST_KIB = 8192


@pytest.fixture
def production_argon2():
    """Keep the configured argon2 parameters (see light_argon2)."""


@pytest.fixture(autouse=True)
def clean_identity_redis():
    """Each test starts with no OTP or sign-in state (this run's own Redis database)."""
    client = get_redis_connection("default")
    for prefix in (otp.KEY_PREFIX, guard.KEY_PREFIX):
        keys = list(client.scan_iter(f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    guard._local._counts.clear()


# --- Mail and SMS ---------------------------------------------------------------------------------


@dataclass
class Inbox:
    messages: list = field(default_factory=list)

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd's handler hook
        self.messages.append({"to": list(envelope.rcpt_tos), "from": envelope.mail_from, "message": message_from_bytes(envelope.content)})
        return "250 Message accepted for delivery"

    def wait(self, count: int = 1, timeout: float = 10.0) -> list:
        deadline = time.monotonic() + patience(timeout)
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.messages

    def code_for(self, address: str) -> str:
        for item in reversed(self.wait()):
            if address in item["to"]:
                return CODE_PATTERN.search(item["message"].get_payload()).group(1)
        raise AssertionError(f"no mail to {address}")


@pytest.fixture
def smtp_server(settings):
    """A real SMTP server (aiosmtpd) on a free port, configured as identity's mail server."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.IDENTITY_MAIL_ENABLED = True
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    try:
        yield inbox
    finally:
        controller.stop()


@dataclass
class SmsProvider:
    """The fake provider's state: what it received and what it answers."""

    url: str
    token: str = "sms-test-token"
    received: list = field(default_factory=list)
    status: int = 202

    def code_for(self, phone: str) -> str:
        for body in reversed(self.received):
            if body["json"]["to"] == phone:
                return CODE_PATTERN.search(body["json"]["text"]).group(1)
        raise AssertionError(f"no SMS to {phone}")


@pytest.fixture
def sms_provider(settings):
    """A fake SMS provider speaking the JSON HTTP protocol of HttpSmsProvider, in a thread."""
    state = SmsProvider(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            state.received.append({"path": self.path, "authorization": self.headers.get("Authorization"), "json": body})
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"id": len(state.received)}).encode())

        def log_message(self, *args):
            """Keep the test output quiet: no access log lines."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1/messages"
    settings.SMS_PROVIDER, settings.SMS_HTTP_URL, settings.SMS_HTTP_TOKEN = "http", state.url, state.token
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def run_tasks_inline(monkeypatch):
    """Celery runs identity's delivery task in the request (the queue itself: test_delivery_queue).
    The service sends it on commit of identity's database: no transaction is open in a request, so
    at once, but the test's own transaction never commits, so here its on-commit hooks run at once."""
    monkeypatch.setattr(connections["identity"], "on_commit", lambda func, robust=False: func())
    celery_app.loader.import_default_modules()  # the tasks modules, as a worker imports them: the task runs here
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = previous


@pytest.fixture
def dead_redis(settings):
    """Redis unreachable for the cache, the OTP store and the sign-in guard (nothing listens on :9)."""
    settings.CACHES = {"default": {**django_settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:9/0"}}
    yield
    from merchant_platform.policy import cache as policy_cache

    policy_cache._cache_state["down_until"] = 0.0


@pytest.fixture
def key_dir(tmp_path, settings):
    """A key directory of this test's own, with one active key."""
    directory = tmp_path / "keys"
    call_command("generate_signing_key", "--dir", str(directory), stdout=io.StringIO())
    settings.IDENTITY_SIGNING_KEY_PATH = directory
    # Keys change within seconds here: let the in-process verifier re-read the ring on every new kid.
    settings.JWKS_REFETCH_MIN_INTERVAL_SECONDS = 0
    yield directory
    jwks_cache.reset()  # the next test's keys are read afresh


# --- API helpers ----------------------------------------------------------------------------------


def post(client, path: str, body: dict, **extra):
    return client.post(API + path, body, content_type="application/json", **extra)


def sign_up(client, *, verified: bool = False, **identifiers) -> dict:
    """Create an account through the API; `verified=True` then marks its email and phone verified,
    as the OTP flows would (an unverified email or phone number does not sign in)."""
    response = post(client, "/auth/sign-up", {**identifiers, "password": identifiers.pop("password", PASSWORD)})
    assert response.status_code == 201, response.content
    if verified:
        mark_verified(int(response.json()["user"]["id"]))
    return response.json()


def mark_verified(user_id: int) -> None:
    now = timezone.now()
    User.objects.filter(pk=user_id, email__isnull=False).update(email_verified_at=now)
    User.objects.filter(pk=user_id, phone__isnull=False).update(phone_verified_at=now)


def sign_in(client, identifier: str, password: str = PASSWORD, **extra):
    return post(client, "/auth/sign-in", {"identifier": identifier, "password": password}, **extra)
