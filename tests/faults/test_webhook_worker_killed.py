"""A webhook worker killed with SIGKILL mid-batch (issue 16, item 13): a real Celery worker claims a
batch of deliveries and is killed while its tries are in flight; once the batch's lease runs out,
the beat sweep (or the dead task's own message, which Redis hands out again) gives them to a new
worker. Every delivery ends SUCCEEDED with one recorded try (the killed tries recorded nothing), and
the subscriber, which dedupes by `webhook-id`, saw every event at least once and nothing else."""

from __future__ import annotations

import os
import signal
import time

import pytest

from apps.payment import services, tasks
from apps.payment.models import WebhookDelivery
from tests.kernel.events.test_celery import start_worker  # noqa: F401 (fixture)
from tests.ledger.test_end_to_end import children
from tests.payment.conftest import new_merchant_id
from tests.payment.test_webhooks import Receiver
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow_fault]
DELIVERIES = 12
LEASE_SECONDS = 4
TRY_SECONDS = 3.0


def test_a_worker_killed_mid_batch_has_its_deliveries_sent_again_after_the_lease(start_worker, test_database_url, settings):  # noqa: F811
    receiver = Receiver()
    receiver.plan = [TRY_SECONDS] * DELIVERIES  # the first batch's tries are slow: the kill lands mid-batch
    worker_env = {
        "DATABASE_URL": test_database_url,
        "PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS": "true",
        "PAYMENT_WEBHOOK_LEASE_SECONDS": str(LEASE_SECONDS),
        "PAYMENT_WEBHOOK_TIMEOUT_SECONDS": str(TRY_SECONDS + 5),
    }
    try:
        merchant_id = new_merchant_id()
        settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True  # the receiver listens on 127.0.0.1
        config, _secret = services.webhook_create(merchant_id=merchant_id, name="w", url=receiver.url, event_types=["*"])
        for n in range(DELIVERIES // 2):  # two deliveries each: transaction.created and attempt.created
            services.transaction_create(merchant_id=merchant_id, source_id=f"o-kill-{n}", amount=100, currency="EUR", channel="SYSTEM")
        deliveries = WebhookDelivery.objects.filter(webhook_id=config.id)
        assert deliveries.count() == DELIVERIES

        first = start_worker("payment", **worker_env)
        wait_for(lambda: len(receiver.received) >= DELIVERIES // 2, timeout=60, message="the batch's tries in flight")
        [pool_pid] = children(first.popen.pid)  # --concurrency=1: one pool process sends the batch
        os.kill(pool_pid, signal.SIGKILL)
        first.stop()
        killed_at = time.monotonic()
        assert not deliveries.exclude(status="PENDING").exists() and not deliveries.filter(attempt_count__gt=0).exists()

        receiver.plan = []
        start_worker("payment", **worker_env)
        wait_for(lambda: time.monotonic() - killed_at > LEASE_SECONDS, timeout=LEASE_SECONDS + 1, message="the lease ran out")
        tasks.deliver_due_webhooks()  # the beat sweep (or the killed task's message, back from Redis, takes them first)
        wait_for(lambda: deliveries.filter(status="SUCCEEDED").count() == DELIVERIES, timeout=60, message="every delivery sent")
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()

    assert set(deliveries.values_list("attempt_count", flat=True)) == {1}
    received_ids = [headers["webhook-id"] for headers, _body in receiver.received]
    assert set(received_ids) == set(deliveries.values_list("message_id", flat=True))
    assert len(received_ids) > DELIVERIES  # the killed tries reached the subscriber too: it dedupes them by webhook-id
