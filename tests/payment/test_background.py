"""Background paths: the WebSocket broadcast to the merchant's payment room through the shared Redis
channel layer, and the Celery tasks (webhook delivery by id, the due sweep, the pending gauge)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer

from apps.payment import services, tasks
from apps.payment.models import WebhookDelivery
from merchant_platform.realtime import group_name
from tests.payment.conftest import new_merchant_id
from tests.payment.test_webhooks import Receiver

pytestmark = pytest.mark.django_db(databases="__all__")


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


def test_the_tasks_deliver_by_id_and_sweep_what_is_due(settings):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True
    receiver = Receiver()
    try:
        merchant_id = new_merchant_id()
        services.webhook_create(merchant_id=merchant_id, name="w", url=receiver.url, event_types=["*"])
        services.transaction_create(merchant_id=merchant_id, source_id="o-task", amount=100, currency="EUR", channel="SYSTEM")
        first, second = WebhookDelivery.objects.filter(merchant_id=merchant_id).order_by("id")
        assert tasks.report_pending_queue() >= 3  # the CREATED attempt and the two deliveries
        tasks.deliver_webhook(first.id)
        first.refresh_from_db()
        assert first.status == "SUCCEEDED"
        assert services.webhook_deliveries_due() == [second.id]
        services.webhook_deliver(delivery_id=second.id)
        assert len(receiver.received) == 2 and tasks.deliver_due_webhooks() == 0
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
