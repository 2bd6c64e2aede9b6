"""Fixtures of the outreach tests: a real SMTP server (aiosmtpd) that receives subscription mail,
operators with real tokens and policies, and helpers to read the token out of a received message."""

from __future__ import annotations

import email
import email.policy
import logging
import re
import threading
import time
from dataclasses import dataclass, field

import pytest
from aiosmtpd.controller import Controller

from apps.outreach.models import Subscriber
from tests.support.ports import free_port
from tests.support.waiting import patience

SUBMIT = "/v1/api/outreach/inquiries/submit"
SUBSCRIBE = "/v1/api/outreach/subscribers/subscribe"
CONFIRM = "/v1/api/outreach/subscribers/confirm"
UNSUBSCRIBE = "/v1/api/outreach/subscribers/unsubscribe"
INQUIRIES = "/v1/api/outreach/inquiries"
SUBSCRIBERS = "/v1/api/outreach/subscribers"
STATISTICS = "/v1/api/outreach/statistics"

TOKEN_IN_LINK = re.compile(r"token=([A-Za-z0-9_-]{43})")


def valid_inquiry(**overrides) -> dict:
    return {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "subject": "Wholesale prices",
        "message": "Hello,\nwhat are your wholesale prices?",
        **overrides,
    }


@dataclass
class Mailbox:
    """What the SMTP server received, in order."""

    messages: list[email.message.EmailMessage] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd's handler hook
        with self.lock:
            self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 Message accepted"

    def to(self, address: str) -> list[email.message.EmailMessage]:
        with self.lock:
            return [message for message in self.messages if message["To"].lower() == address.lower()]

    def wait_to(self, address: str, count: int = 1, timeout: float = 5.0) -> list[email.message.EmailMessage]:
        """The messages to `address` once there are at least `count` of them."""
        deadline = time.monotonic() + patience(timeout)
        while len(received := self.to(address)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} message(s) to {address}, received {len(received)}")
            time.sleep(0.02)
        return received


def token_of(message: email.message.EmailMessage) -> str:
    tokens = set(TOKEN_IN_LINK.findall(message.get_content())) | set(TOKEN_IN_LINK.findall(message["List-Unsubscribe"]))
    assert len(tokens) == 1, tokens
    return tokens.pop()


@pytest.fixture(scope="session")
def smtp_server():
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd's per-command lines
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield mailbox, controller.port
    controller.stop()


@pytest.fixture
def mailbox(smtp_server, settings) -> Mailbox:
    """Subscription mail goes to the test SMTP server through Django's real SMTP backend."""
    box, port = smtp_server
    with box.lock:
        box.messages.clear()
    settings.EMAIL_URL = f"smtp://127.0.0.1:{port}"
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    return box


@pytest.fixture
def subscribe(client, mailbox, django_capture_on_commit_callbacks):
    """Subscribe `address` through the public endpoint and return the token mailed to it."""

    def run(address: str, **extra) -> str:
        before = len(mailbox.to(address))
        with django_capture_on_commit_callbacks(using="outreach", execute=True):
            response = client.post(SUBSCRIBE, {"email": address, **extra}, content_type="application/json")
        assert response.status_code == 202, response.content
        return token_of(mailbox.wait_to(address, before + 1)[-1])

    return run


@pytest.fixture
def operator(make_caller):
    """A platform ADMIN's client (real ES256 token, real policies)."""
    return make_caller(roles=["ADMIN"]).client()


def subscriber(address: str) -> Subscriber:
    return Subscriber.objects.get(email=address)
