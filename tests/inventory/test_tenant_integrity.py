"""Tenant integrity of inventory's keys and inputs: every key that de-duplicates or locks a stock
change includes the merchant, so one merchant's event or reservation never stands in for another's
with the same order reference; an event naming another merchant's records is parked on the DLQ
with the reason; a payment without lines deducts nothing and parks nothing."""

from __future__ import annotations

import json

import pytest

from apps.inventory import services
from apps.inventory.consumers import PAYMENT_CONSUMER, payment_success
from apps.inventory.models import Note, OutboxMessage, Reservation, Tracking
from merchant_platform.errors import InvalidInput
from merchant_platform.messaging import Message, topics
from tests.inventory.conftest import new_id, new_item, stock_of
from tests.inventory.test_payment_success import paid
from tests.support.auth import make_caller
from tests.support.broker import produce, read_topic
from tests.support.consumers import RunningConsumer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def _message(value: dict, message_id: str, offset: int = 0) -> Message:
    return Message("payment.success", 0, offset, value["transaction"]["sourceId"], json.dumps(value).encode(), {"messageId": message_id})


def _deducted(merchant: int, order: str) -> list[tuple]:
    rows = Tracking.objects.filter(merchant_id=merchant, operation="DEDUCT", reference_id=order).order_by("reference_line")
    return [(t.reference_line, t.delta, t.note) for t in rows]


def _cogs(merchant: int, order: str) -> list[dict]:
    events = [json.loads(row.value) for row in OutboxMessage.objects.filter(topic=topics.INVENTORY_COGS.name, key=order)]
    return [event for event in events if event["merchantId"] == str(merchant)]


def test_another_merchants_payment_with_the_same_order_reference_does_not_suppress_the_deduction():
    """Merchant B pays a transaction of its own whose sourceId is merchant A's order reference and
    whose lines name B's variant; A's customer then pays A's order: both are deducted, A's
    reservation is converted and A gets its COGS event."""
    merchant_a, merchant_b = new_id(), new_id()
    lamp = new_item(merchant_a, on_hand=10, unit_cost_amount=700)
    decoy = new_item(merchant_b, on_hand=10, unit_cost_amount=5)
    services.reservation_reserve(order_id="SO-1", merchant_id=merchant_a, lines=[{"line_id": "1", "item_id": lamp.id, "quantity": 2}])
    payment_success([_message(paid("SO-1", merchant_b, (decoy, 1)), "attack")])
    payment_success([_message(paid("SO-1", merchant_a, (lamp, 2)), "genuine")])
    assert _deducted(merchant_b, "SO-1") == [("1", -1, "")]
    assert _deducted(merchant_a, "SO-1") == [("1", -2, Note.RESERVATION_CONVERTED)]
    assert (stock_of(lamp).quantity_on_hand, stock_of(lamp).reserved) == (8, 0)
    assert Reservation.objects.get(merchant_id=merchant_a, order_id="SO-1").status == Reservation.Status.COMMITTED
    assert [event["totalCostAmount"] for event in _cogs(merchant_a, "SO-1")] == [1400]
    assert [event["totalCostAmount"] for event in _cogs(merchant_b, "SO-1")] == [5]


def test_two_merchants_reserve_and_release_the_same_order_reference_independently():
    merchant_a, merchant_b = new_id(), new_id()
    lamp, desk = new_item(merchant_a, on_hand=5), new_item(merchant_b, on_hand=5)
    services.reservation_reserve(order_id="SO-2", merchant_id=merchant_a, lines=[{"line_id": "1", "item_id": lamp.id, "quantity": 1}])
    services.reservation_reserve(order_id="SO-2", merchant_id=merchant_b, lines=[{"line_id": "1", "item_id": desk.id, "quantity": 3}])
    with pytest.raises(InvalidInput):  # two merchants under one reference: the caller must name one
        services.reservation_release(order_id="SO-2")
    services.reservation_release(order_id="SO-2", merchant_id=merchant_b)
    assert (stock_of(lamp).reserved, stock_of(desk).reserved) == (1, 0)
    rows = services.reservation_commit(order_id="SO-2", merchant_id=merchant_a)
    assert [(row.merchant_id, row.delta) for row in rows] == [(merchant_a, -1)]
    assert stock_of(desk).quantity_on_hand == 5


def test_a_payment_naming_another_merchants_records_is_parked_with_the_reason(make_topic, raw_producer):
    topic, merchant_a, merchant_b = make_topic(), new_id(), new_id()
    lamp, decoy = new_item(merchant_a, on_hand=5), new_item(merchant_b, on_hand=5)
    location_a = stock_of(lamp).location_id
    foreign_location = paid("SO-4", merchant_b, (decoy, 1))
    foreign_location["order"]["lines"][0]["locationId"] = str(location_a)
    runner = RunningConsumer.registered(PAYMENT_CONSUMER, topic, max_retries=3, retry_backoff_seconds=5)
    try:
        produce(raw_producer, topic, [paid("SO-3", merchant_b, (lamp, 1))], key="k")  # A's variant in B's payment
        produce(raw_producer, topic, [foreign_location], key="k")  # A's location in B's payment
        produce(raw_producer, topic, [paid("SO-5", merchant_b, (decoy, 2))], key="k")
        wait_for(lambda: _deducted(merchant_b, "SO-5"), message="the message after the foreign ones")
        parked = read_topic(f"{topic}.DLQ", expected=2, timeout=10)
    finally:
        runner.finish()
    assert [json.loads(record.value)["transaction"]["sourceId"] for record in parked] == ["SO-3", "SO-4"]
    errors = [dict(record.headers)["dlq.error"].decode() for record in parked]
    assert all("another merchant" in error for error in errors), errors
    assert [dict(record.headers)["dlq.attempts"] for record in parked] == [b"1", b"1"]  # parked at once, no retry can fix it
    assert (stock_of(lamp).quantity_on_hand, stock_of(decoy).quantity_on_hand) == (5, 3)


def test_a_payment_without_lines_deducts_nothing_and_parks_nothing(make_topic, raw_producer, kafka_admin):
    topic, merchant = make_topic(), new_id()
    lamp = new_item(merchant, on_hand=5)
    runner = RunningConsumer.registered(PAYMENT_CONSUMER, topic, max_retries=1)
    try:
        produce(raw_producer, topic, [paid("SO-6", merchant)], key="k")  # opened through payment's API: no lines
        without_order = paid("SO-7", merchant)
        del without_order["order"]["lines"]
        produce(raw_producer, topic, [without_order], key="k")
        produce(raw_producer, topic, [paid("SO-8", merchant, (lamp, 1))], key="k")
        wait_for(lambda: _deducted(merchant, "SO-8"), message="the paid order with lines")
    finally:
        runner.finish()
    assert f"{topic}.DLQ" not in kafka_admin.list_topics()
    assert _deducted(merchant, "SO-6") == [] and _cogs(merchant, "SO-6") == []
    assert stock_of(lamp).quantity_on_hand == 4


def test_http_bodies_naming_another_merchants_records_are_404(seeded, service_client):
    merchant, other = new_id(), new_id()
    mine, theirs = new_item(merchant), new_item(other)
    their_location = services.location_ensure_default(merchant_id=other)
    client = make_caller(roles=[("ADMIN", merchant)]).client()
    base = "/v1/api/inventory"
    order = {"merchantId": str(merchant), "supplier": "S", "currency": "EUR"}
    line = {"quantity": 1, "unitCostAmount": 1}
    for path, body in (
        ("purchase-orders", {**order, "lines": [{"inventoryItemId": str(theirs.id), **line}]}),
        ("purchase-orders", {**order, "locationId": str(their_location.id), "lines": [{"inventoryItemId": str(mine.id), **line}]}),
        ("tickets", {"inventoryItemId": str(mine.id), "locationId": str(their_location.id)}),
        ("stock/adjustments", {"inventoryItemId": str(mine.id), "locationId": str(their_location.id), "delta": 1, "reason": "x"}),
    ):
        response = client.post(f"{base}/{path}", body, format="json")
        assert response.status_code == 404, (path, body, response.content)
    reserve = {"orderId": "SO-9", "merchantId": str(merchant)}
    for reserved_line in (
        {"lineId": "1", "variantId": str(theirs.variant_id), "quantity": 1},
        {"lineId": "1", "inventoryItemId": str(theirs.id), "quantity": 1},
        {"lineId": "1", "inventoryItemId": str(mine.id), "quantity": 1, "locationId": str(their_location.id)},
    ):
        response = service_client.post(f"{base}/internal/reservations", {**reserve, "lines": [reserved_line]}, format="json")
        assert response.status_code == 404, (reserved_line, response.content)
    assert not Reservation.objects.filter(order_id="SO-9").exists()
