"""Subscription mail: the only way a subscriber's token leaves the service.

Outreach has no job queue (spec 1.3), so a small in-process sender delivers the messages after the
database commit: a public request never waits on SMTP (its latency and answer stay the same whether
an address was new or known), and a bounded backlog keeps a flood of requests from piling up
threads or memory. A message lost to a crash is recovered by subscribing again once the cooldown has
passed. Logs name the subscriber id, never the address's token or the links.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from apps.outreach import metrics
from merchant_platform.logging import get_logger

log = get_logger(__name__)


@dataclass(frozen=True)
class SubscriberMessage:
    subscriber_id: int
    to: str
    subject: str
    body: str
    headers: dict[str, str]


def unsubscribe_headers(token: str) -> dict[str, str]:
    """RFC 2369 / RFC 8058 headers: mail clients show an unsubscribe button that POSTs
    `List-Unsubscribe=One-Click` to the URL, with no cookie, login or confirmation page."""
    return {
        "List-Unsubscribe": f"<{settings.OUTREACH_ONE_CLICK_URL.format(token=token)}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


def confirmation_message(*, subscriber_id: int, email: str, token: str) -> SubscriberMessage:
    body = (
        "Please confirm your subscription to our newsletter:\n\n"
        f"{settings.OUTREACH_CONFIRM_URL.format(token=token)}\n\n"
        "If you did not ask for it, ignore this message; nothing will be sent to you.\n"
        f"Unsubscribe at any time: {settings.OUTREACH_UNSUBSCRIBE_URL.format(token=token)}\n"
    )
    return SubscriberMessage(subscriber_id, email, "Confirm your subscription", body, unsubscribe_headers(token))


def welcome_message(*, subscriber_id: int, email: str, token: str) -> SubscriberMessage:
    body = f"You are subscribed to our newsletter.\n\nUnsubscribe at any time: {settings.OUTREACH_UNSUBSCRIBE_URL.format(token=token)}\n"
    return SubscriberMessage(subscriber_id, email, "You are subscribed", body, unsubscribe_headers(token))


class _Sender:
    """A two-thread pool with a bounded backlog, created per process (the WSGI server forks workers)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._slots: threading.BoundedSemaphore | None = None

    def _ready(self) -> tuple[ThreadPoolExecutor, threading.BoundedSemaphore]:
        with self._lock:
            if self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="outreach-mail")
                self._slots = threading.BoundedSemaphore(settings.OUTREACH_MAIL_BACKLOG)
                self._pid = os.getpid()
            return self._pool, self._slots

    def submit(self, message: SubscriberMessage) -> None:
        pool, slots = self._ready()
        if not slots.acquire(blocking=False):
            metrics.MAIL.labels(result="dropped").inc()
            log.warning("outreach.mail.dropped", subscriberId=str(message.subscriber_id), reason="backlog full")
            return
        pool.submit(_deliver, message).add_done_callback(lambda _: slots.release())


_sender = _Sender()


def _deliver(message: SubscriberMessage) -> None:
    try:
        connection = get_connection(timeout=settings.EMAIL_TIMEOUT)
        EmailMessage(
            subject=message.subject,
            body=message.body,
            from_email=settings.OUTREACH_MAIL_FROM or settings.DEFAULT_FROM_EMAIL,
            to=[message.to],
            headers=message.headers,
            connection=connection,
        ).send()
    except Exception as exc:  # SMTP down or refusing: logged and counted, the subscriber may retry later
        metrics.MAIL.labels(result="failed").inc()
        log.error("outreach.mail.failed", subscriberId=str(message.subscriber_id), error=type(exc).__name__)
        return
    metrics.MAIL.labels(result="sent").inc()
    log.info("outreach.mail.sent", subscriberId=str(message.subscriber_id))


def send(message: SubscriberMessage) -> None:
    """Queue `message` for delivery (call it after the commit that created its token)."""
    if not settings.EMAIL_URL:
        metrics.MAIL.labels(result="disabled").inc()
        log.warning("outreach.mail.disabled", subscriberId=str(message.subscriber_id), reason="EMAIL_URL is empty")
        return
    _sender.submit(message)
