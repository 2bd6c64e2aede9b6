"""The OTP mail goes through the real Celery queue (Redis broker) to a real SMTP server."""

from __future__ import annotations

import logging

import pytest
from celery.contrib.testing.worker import start_worker

from apps.identity import passwords
from apps.identity.models import User
from apps.identity.tasks import deliver_one_time_password
from merchant_platform.celery import IDENTITY_MAIL_QUEUE
from merchant_platform.celery import app as celery_app
from tests.identity.conftest import PASSWORD, post
from tests.support.logs import LogCapture

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


def test_a_queued_code_copied_onto_another_address_is_not_delivered(client, smtp_server, capsys):
    """Whoever can write the broker's Redis could copy a queued delivery with another destination:
    the destination is sealed with the code (AES-GCM associated data), so the copy does not open."""
    User.objects.create(email="victim@example.com", password_hash=passwords.hash_password(PASSWORD))
    User.objects.create(email="attacker@example.com", password_hash=passwords.hash_password(PASSWORD))
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(IDENTITY_MAIL_QUEUE)
        assert post(client, "/auth/otp/forgot-password/request", {"identifier": "victim@example.com"}).status_code == 202
        message = connection.default_channel.basic_get(IDENTITY_MAIL_QUEUE, no_ack=True)
    namespace, kind, value, sealed = message.decode()[0]
    assert value == "victim@example.com"
    capture = LogCapture(capsys)
    logging.getLogger().addHandler(capture.handler)
    try:
        for forged in ((namespace, kind, "attacker@example.com", sealed), ("verify-email", kind, value, sealed)):
            assert deliver_one_time_password.apply(args=forged).get() == "rejected"
    finally:
        logging.getLogger().removeHandler(capture.handler)
    assert smtp_server.messages == []
    assert len(capture.matching("identity.otp_not_delivered", "sealed code does not match")) == 2
    assert deliver_one_time_password.apply(args=(namespace, kind, value, sealed)).get() == "sent"
    (mail,) = smtp_server.wait(1)
    assert mail["to"] == ["victim@example.com"]
