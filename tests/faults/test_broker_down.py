"""The Kafka broker goes away while payments settle and a purchase order is received, and comes back
(spec 6.2, 7), on a broker of this test's own (tests/faults/conftest.py: private_broker). Settling
and receiving still commit; their events wait in the outbox and are published once the broker is
back, at least once; inventory's payment.success consumer (its own process, started before the outage)
resumes from its committed offset and deducts every order exactly once."""

from __future__ import annotations

import contextlib
import io
import json
import time

import pytest
from django.core.management import call_command
from django.db.models import Count
from kafka import KafkaConsumer, TopicPartition

from apps.inventory import services as inventory
from apps.inventory.consumers import PAYMENT_CONSUMER
from apps.inventory.models import OutboxMessage as InventoryOutbox
from apps.inventory.models import Tracking
from apps.payment import services as payment
from apps.payment.models import OutboxMessage as PaymentOutbox
from merchant_platform.messaging import topics
from merchant_platform.messaging.outbox import OutboxRelay
from merchant_platform.messaging.producer import PublishError, close_producer
from tests.inventory.conftest import new_id, new_item
from tests.payment.conftest import add_integration, secret, signed  # noqa: F401
from tests.support.broker import unique
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow_fault]


@pytest.fixture
def on_private_broker(settings, private_broker):
    """This process's producer and admin on the private broker, with the platform's topics."""
    close_producer()
    settings.KAFKA_BOOTSTRAP_SERVERS = [private_broker.address]
    call_command("create_topics", stdout=io.StringIO())
    yield private_broker
    close_producer()


def settle(client, secret: str, merchant: int, order: str, item) -> None:  # noqa: F811
    created = payment.transaction_create(
        merchant_id=merchant,
        source_id=order,
        amount=1000,
        currency="EUR",
        channel="SYSTEM",
        lines=[{"lineId": "1", "variantId": str(item.variant_id), "quantity": 1}],
    )
    payment.attempt_send(attempt_id=created.attempt.id)
    fields = {"prov_TxnRef": created.attempt.code, "prov_Amount": "100000", "prov_ResponseCode": "00", "prov_TransactionNo": order}
    response = client.post("/api/pay/system/ipn", json.dumps(signed(fields, secret)), content_type="application/json")
    assert response.json()["RspCode"] == "00"


def records(address: str, topic: str, *, expected: int) -> list:
    """Every record of `topic` (waiting until `expected` arrived, then one more poll for extras)."""
    reader = KafkaConsumer(bootstrap_servers=address, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic)]
        reader.assign(partitions)
        reader.seek_to_beginning(*partitions)
        found: list = []
        deadline = time.monotonic() + 20
        while len(found) < expected and time.monotonic() < deadline:
            found += [record for batch in reader.poll(timeout_ms=300).values() for record in batch]
        return found + [record for batch in reader.poll(timeout_ms=1000).values() for record in batch]
    finally:
        reader.close()


def committed(address: str, group: str, topic: str) -> int:
    reader = KafkaConsumer(bootstrap_servers=address, group_id=group, enable_auto_commit=False)
    try:
        return sum(reader.committed(TopicPartition(topic, p)) or 0 for p in reader.partitions_for_topic(topic))
    finally:
        reader.close()


def relay_everything() -> bool:
    with contextlib.suppress(PublishError):
        for model in (PaymentOutbox, InventoryOutbox):
            OutboxRelay(model).relay_pending()
    return not (
        PaymentOutbox.objects.filter(sent_at__isnull=True).exists() or InventoryOutbox.objects.filter(sent_at__isnull=True).exists()
    )


def test_broker_down_during_settlement_and_receiving(client, secret, on_private_broker, spawn, subprocess_env):  # noqa: F811
    address, proxy = on_private_broker.address, on_private_broker.proxy
    merchant, prefix, group = new_id(), unique("SO"), unique("inventory-fault")
    add_integration(merchant, channel="SYSTEM", secret=secret)
    item = new_item(merchant, on_hand=100)
    env = subprocess_env(KAFKA_BOOTSTRAP_SERVERS=address)
    spawn("-m", "tests.kernel.events.consume", PAYMENT_CONSUMER, topics.PAYMENT_SUCCESS.name, group, env=env, name="inventory-consumer")

    def deducted() -> int:
        return Tracking.objects.filter(operation="DEDUCT", reference_id__startswith=prefix).count()

    for n in range(3):
        settle(client, secret, merchant, f"{prefix}-{n}", item)
    wait_for(lambda: deducted() == 3, timeout=60, message="the first orders deducted")
    wait_for(lambda: committed(address, group, topics.PAYMENT_SUCCESS.name) == 3, timeout=30, message="their offsets committed")

    proxy.cut()
    for n in range(3, 8):
        settle(client, secret, merchant, f"{prefix}-{n}", item)
    order = inventory.purchase_order_create(
        merchant_id=merchant, supplier="S", currency="EUR", lines=[{"item_id": item.id, "quantity": 10, "unit_cost_amount": 90}]
    )
    inventory.purchase_order_place(purchase_order_id=order.id)
    inventory.purchase_order_receive(purchase_order_id=order.id, receipt_id="r-1", lines=[{"item_id": item.id, "quantity": 10}])
    time.sleep(2)  # the after-commit relay tries meanwhile, and fails: the events wait in the outbox
    assert PaymentOutbox.objects.filter(topic=topics.PAYMENT_SUCCESS.name, sent_at__isnull=True).count() == 5
    assert InventoryOutbox.objects.filter(topic=topics.PURCHASE_ORDER_RECEIVED.name, sent_at__isnull=True).count() == 1
    assert deducted() == 3

    proxy.restore()
    wait_for(relay_everything, timeout=60, message="the outbox relayed")
    wait_for(lambda: deducted() == 8, timeout=60, message="every order deducted")
    wait_for(lambda: committed(address, group, topics.PAYMENT_SUCCESS.name) == 8, timeout=30, message="every offset committed")

    success = [json.loads(r.value)["transaction"]["sourceId"] for r in records(address, topics.PAYMENT_SUCCESS.name, expected=8)]
    # At least once on the wire (a batch the broker took just as it went away is sent again), once in effect.
    assert set(success) == {f"{prefix}-{n}" for n in range(8)}
    received = {json.loads(r.value)["receiptId"] for r in records(address, topics.PURCHASE_ORDER_RECEIVED.name, expected=1)}
    assert received == {"r-1"}
    per_order = Tracking.objects.filter(operation="DEDUCT", reference_id__startswith=prefix).values("reference_id").annotate(n=Count("id"))
    assert len(per_order) == 8 and {row["n"] for row in per_order} == {1}
