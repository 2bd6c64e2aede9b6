"""The OTP mail goes through the real Celery queue (Redis broker) to a real SMTP server."""

from __future__ import annotations

import pytest
from celery.contrib.testing.worker import start_worker

from apps.identity import passwords
from apps.identity.models import User
from merchant_platform.celery import IDENTITY_MAIL_QUEUE
from merchant_platform.celery import app as celery_app
from tests.identity.conftest import PASSWORD, post

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow]


def test_a_code_requested_over_http_is_mailed_by_a_worker_of_the_identity_mail_queue(client, smtp_server):
    User.objects.create(email="queued@example.com", password_hash=passwords.hash_password(PASSWORD))
    assert celery_app.conf.task_always_eager is False
    with celery_app.connection_for_write() as connection:  # tasks other tests left in this run's queue
        connection.default_channel.queue_purge(IDENTITY_MAIL_QUEUE)
    response = post(client, "/auth/otp/verify-email/request", {"identifier": "queued@example.com"})
    assert response.status_code == 202
    assert smtp_server.messages == []  # nothing is sent in the request itself
    with start_worker(
        celery_app, queues=[IDENTITY_MAIL_QUEUE], perform_ping_check=False, pool="solo", loglevel="WARNING", shutdown_timeout=10
    ):
        (mail,) = smtp_server.wait(1, timeout=20)
    assert mail["to"] == ["queued@example.com"]
    assert "verify your email address" in mail["message"].get_payload()
    code = smtp_server.code_for("queued@example.com")
    verified = post(client, "/auth/otp/verify-email/verify", {"identifier": "queued@example.com", "code": code})
    assert verified.status_code == 200
