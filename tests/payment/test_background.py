"""Background paths: the WebSocket broadcast to the merchant's payment room through the shared Redis
channel layer, and the Celery tasks (webhook deliveries by id filling a batch, the due sweep, the pending gauge)."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from redis import RedisError

from apps.payment import services, tasks
from apps.payment.models import WebhookDelivery
from merchant_platform.celery import app
from merchant_platform.realtime import group_name
from tests.payment.conftest import new_merchant_id
from tests.payment.test_webhooks import Receiver

pytestmark = pytest.mark.django_db(databases="__all__")
PAYMENT_QUEUE = "payment"  # where apps.payment's tasks go (merchant_platform.celery routes by service)


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_events_reach_the_merchants_payment_room():
    layer = get_channel_layer()
    merchant_id = new_merchant_id()
    room = f"merchant.{merchant_id}.payment"

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group_name(room), channel)
        try:
            created = await sync_to_async(services.transaction_create)(
                merchant_id=merchant_id, source_id="o-ws", amount=100, currency="EUR", channel="SYSTEM"
            )
            received = [await asyncio.wait_for(layer.receive(channel), timeout=5) for _ in range(2)]
        finally:
            await layer.group_discard(group_name(room), channel)
        return created, received

    created, received = async_to_sync(scenario)()
    assert [message["event"] for message in received] == ["payment.transaction.created", "payment.attempt.created"]
    assert received[0]["room"] == room and received[0]["payload"]["transaction"]["id"] == str(created.transaction.id)


def test_the_tasks_deliver_by_id_fill_the_batch_with_what_is_due_and_sweep(settings):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True
    receiver = Receiver()
    try:
        merchant_id = new_merchant_id()
        services.webhook_create(merchant_id=merchant_id, name="w", url=receiver.url, event_types=["*"])
        services.transaction_create(merchant_id=merchant_id, source_id="o-task", amount=100, currency="EUR", channel="SYSTEM")
        first, second = WebhookDelivery.objects.filter(merchant_id=merchant_id).order_by("id")
        assert tasks.report_pending_queue() >= 3  # the CREATED attempt and the two deliveries
        settings.PAYMENT_WEBHOOK_BATCH_SIZE = 1
        assert tasks.deliver_webhooks(first.id) == 1  # a full batch: its own delivery only
        first.refresh_from_db()
        assert first.status == "SUCCEEDED"
        assert services.webhook_deliveries_due() == [second.id]
        settings.PAYMENT_WEBHOOK_BATCH_SIZE = 100
        # A task whose delivery was sent already takes the others that are due.
        assert tasks.deliver_webhooks(first.id) == 1
        second.refresh_from_db()
        assert second.status == "SUCCEEDED" and second.attempt_count == 1
        assert len(receiver.received) == 2 and tasks.deliver_due_webhooks() == 0
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


@pytest.fixture
def queued():
    """`queued()`: the tasks (name, args) put on the broker's `payment` queue since the test began,
    oldest first, read from the real broker (Celery's Redis transport pushes each message at the head
    of the queue's list); no delivery task is waiting at the start."""
    broker = app.connection_for_write().channel().client
    before = broker.llen(PAYMENT_QUEUE)
    services.webhook_task_started()

    def read() -> list[tuple[str, list]]:
        new = broker.lrange(PAYMENT_QUEUE, 0, broker.llen(PAYMENT_QUEUE) - before - 1)
        messages = [json.loads(raw) for raw in reversed(new)]
        return [(m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0]) for m in messages]

    yield read
    services.webhook_task_started()


def test_dispatches_share_the_task_waiting_to_start(queued):
    services.webhook_dispatch([1])
    services.webhook_dispatch([2])  # the task queued for 1 takes it: it fills its batch with what is due
    assert queued() == [(services.DELIVER_TASK, [1])]
    services.webhook_task_started()
    services.webhook_dispatch([3])  # the first task may have claimed before 3 committed: a new one
    assert queued() == [(services.DELIVER_TASK, [1]), (services.DELIVER_TASK, [3])]


def test_with_redis_unreachable_every_dispatch_queues_its_task(queued, monkeypatch):
    class Unreachable:
        def set(self, *args, **kwargs):
            raise RedisError("connection refused")

        delete = set

    monkeypatch.setattr(services.webhook_deliveries, "get_redis_connection", lambda alias: Unreachable())
    services.webhook_dispatch([1])
    services.webhook_dispatch([2])
    assert queued() == [(services.DELIVER_TASK, [1]), (services.DELIVER_TASK, [2])]


def test_a_full_batch_queues_the_next_one_before_sending(queued, settings):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True
    settings.PAYMENT_WEBHOOK_BATCH_SIZE = 2
    receiver = Receiver()
    try:
        merchant_id = new_merchant_id()
        services.webhook_create(merchant_id=merchant_id, name="w", url=receiver.url, event_types=["*"])
        services.transaction_create(merchant_id=merchant_id, source_id="o-full", amount=100, currency="EUR", channel="SYSTEM")
        services.transaction_create(merchant_id=merchant_id, source_id="o-more", amount=100, currency="EUR", channel="SYSTEM")
        first = WebhookDelivery.objects.filter(merchant_id=merchant_id).order_by("id").first()
        assert len(services.webhook_deliver_many(delivery_ids=[first.id])) == 2
        assert queued() == [(services.DELIVER_TASK, [])]  # two more are due: the next batch's task
        assert len(services.webhook_deliver_many(delivery_ids=[])) == 2 and len(receiver.received) == 4
    finally:
        receiver.server.shutdown()
