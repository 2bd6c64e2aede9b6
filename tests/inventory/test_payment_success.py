"""The payment.success consumer (spec 6.2, 7) on the real broker, under the kernel's runner: each
order line is deducted once (a redelivery or a re-publication finds the tracking rows and does
nothing), a reservation is converted, a deduction that would oversell an item without allowOversell
is blocked and tracked OVERSELL_BLOCKED, with allowOversell it goes negative; a poison message is
parked and later messages flow; the cost of goods sold is published for finance (outbox)."""

from __future__ import annotations

import json

import pytest

from apps.inventory import services
from apps.inventory.consumers import PAYMENT_CONSUMER, payment_success
from apps.inventory.models import Note, OutboxMessage, Tracking
from merchant_platform.messaging import Message, topics
from tests.inventory.conftest import new_id, new_item, stock_of
from tests.support.broker import produce, read_topic
from tests.support.consumers import RunningConsumer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def paid(order: str, merchant: int, *lines, **order_fields) -> dict:
    """A payment.success value as payment emits it (its contract, merchant_platform/messaging/contracts.py:
    spec 2.5 attempt success + order)."""
    transaction_id, order_lines = (
        str(new_id()),
        [{"lineId": str(n), "variantId": str(item.variant_id), "quantity": q} for n, (item, q) in enumerate(lines, 1)],
    )
    common = {"merchantId": str(merchant), "sourceType": "ORDER", "sourceId": order, "financeAccountId": None, "currency": "EUR"}
    return {
        "event": "attempt.success",
        "timestamp": "2026-11-25T13:00:00.000000+00:00",
        "source": "payment",
        "transaction": {
            **common,
            "id": transaction_id,
            "amount": 2500,
            "paidAmount": 2500,
            "taxAmount": None,
            "lines": order_lines,
            "status": "SETTLED",
            "createdAt": "2026-11-25T12:59:00+00:00",
            "settledAt": "2026-11-25T13:00:00+00:00",
            "cancelledAt": None,
        },
        "attempt": {
            **common,
            "id": str(new_id()),
            "transactionId": transaction_id,
            "channel": "QR",
            "code": f"A-{order}",
            "amount": 2500,
            "status": "302_SUCCESS",
            "providerReference": "14012345",
            "bankCode": "NCB",
            "failureReason": "",
            "expiresAt": None,
            "paidAt": "2026-11-25T13:00:00+00:00",
        },
        "order": {
            "merchantId": str(merchant),
            "transactionId": transaction_id,
            "sourceType": "ORDER",
            "lines": order_lines,
            **order_fields,
        },
    }


def deductions(order: str) -> list[tuple]:
    rows = Tracking.objects.filter(reference_type="SALE_ORDER", reference_id=order).order_by("reference_line")
    return [(t.reference_line, t.delta, t.note) for t in rows]


def test_paid_order_is_deducted_once_and_reservations_convert(make_topic, raw_producer):
    topic, merchant = make_topic(), new_id()
    lamp, desk = new_item(merchant, on_hand=10, unit_cost_amount=700), new_item(merchant, on_hand=4, unit_cost_amount=2000)
    services.reservation_reserve(order_id="p-1", merchant_id=merchant, lines=[{"line_id": "2", "item_id": desk.id, "quantity": 1}])
    runner = RunningConsumer.registered(PAYMENT_CONSUMER, topic)
    try:
        value = paid("p-1", merchant, (lamp, 3), (desk, 1))
        produce(raw_producer, topic, [value], key="p-1", headers={"messageId": "pay-1"})
        wait_for(lambda: len(deductions("p-1")) == 2, message="the deduction")
        produce(raw_producer, topic, [value], key="p-1", headers={"messageId": "pay-1"})  # redelivered
        produce(raw_producer, topic, [value], key="p-1", headers={"messageId": "pay-1-again"})  # published twice by payment
        produce(raw_producer, topic, [paid("p-2", merchant, (lamp, 1))], key="p-2")
        wait_for(lambda: deductions("p-2"), message="the next order")
    finally:
        runner.finish()
    assert deductions("p-1") == [("1", -3, ""), ("2", -1, Note.RESERVATION_CONVERTED)]
    assert (stock_of(lamp).quantity_on_hand, stock_of(desk).quantity_on_hand, stock_of(desk).reserved) == (6, 3, 0)
    cogs = [json.loads(m.value) for m in OutboxMessage.objects.filter(topic=topics.INVENTORY_COGS.name) if '"p-1"' in m.value]
    assert len(cogs) == 1
    assert cogs[0]["totalCostAmount"] == 3 * 700 + 2000
    assert [(line["lineId"], line["quantity"], line["costAmount"]) for line in cogs[0]["lines"]] == [("1", 3, 2100), ("2", 1, 2000)]
    assert (cogs[0]["merchantId"], cogs[0]["currency"]) == (str(merchant), "EUR")


def test_oversell_is_blocked_without_allow_oversell_and_negative_with_it(make_topic, raw_producer):
    topic, merchant = make_topic(), new_id()
    strict, lenient = new_item(merchant, on_hand=2), new_item(merchant, on_hand=2, allow_oversell=True)
    runner = RunningConsumer.registered(PAYMENT_CONSUMER, topic)
    try:
        produce(raw_producer, topic, [paid("p-3", merchant, (strict, 5), (lenient, 5))])
        wait_for(lambda: len(deductions("p-3")) == 2, message="the deduction")
    finally:
        runner.finish()
    assert deductions("p-3") == [("1", 0, Note.OVERSELL_BLOCKED), ("2", -5, Note.OVERSOLD)]
    blocked = Tracking.objects.get(reference_id="p-3", reference_line="1")
    assert (blocked.requested, blocked.quantity_after) == (5, 2)
    assert (stock_of(strict).quantity_on_hand, stock_of(lenient).quantity_on_hand) == (2, -3)


def test_a_poison_message_is_parked_and_later_messages_flow(make_topic, raw_producer):
    topic, merchant = make_topic(), new_id()
    lamp = new_item(merchant, on_hand=5)
    runner = RunningConsumer.registered(PAYMENT_CONSUMER, topic, max_retries=1)
    try:
        produce(raw_producer, topic, [{"event": "pay:attempt.success", "transaction": {"sourceId": "p-4"}}], key="k")  # no order
        produce(raw_producer, topic, [paid("p-5", merchant, (lamp, 0))], key="k")  # quantity 0
        produce(raw_producer, topic, [b"not json"], key="k")
        produce(raw_producer, topic, [paid("p-6", merchant, (lamp, 2))], key="k")
        wait_for(lambda: deductions("p-6"), message="the message after the poison ones")
        parked = read_topic(f"{topic}.DLQ", expected=3, timeout=30)
    finally:
        runner.finish()
    assert len(parked) == 3
    assert stock_of(lamp).quantity_on_hand == 3


def _message(value: dict, message_id: str, offset: int) -> Message:
    return Message("payment.success", 0, offset, value["transaction"]["sourceId"], json.dumps(value).encode(), {"messageId": message_id})


def test_one_batch_applies_its_orders_in_turn_once_each(merchant_id):
    """The batch handler gets a poll's messages at once: an order paid before the batch and an order
    repeated inside it change nothing, orders on the same item see each other's deductions in turn
    (the second one on a scarce item is blocked, the third takes the last unit), allowOversell goes
    negative, and each order deducted gets one inventory.cogs event keyed by the order."""
    scarce = new_item(merchant_id, on_hand=3, unit_cost_amount=500)
    lenient = new_item(merchant_id, on_hand=1, allow_oversell=True, unit_cost_amount=40)
    plenty = new_item(merchant_id, on_hand=100, unit_cost_amount=7)
    payment_success([_message(paid("b-0", merchant_id, (plenty, 1)), "m-0", 0)])
    payment_success(
        [
            _message(paid("b-0", merchant_id, (plenty, 1)), "m-0-republished", 1),
            _message(paid("b-1", merchant_id, (scarce, 2), (plenty, 1)), "m-1", 2),
            _message(paid("b-1", merchant_id, (scarce, 2), (plenty, 1)), "m-1-republished", 3),
            _message(paid("b-2", merchant_id, (scarce, 2), (lenient, 3)), "m-2", 4),
            _message(paid("b-3", merchant_id, (scarce, 1)), "m-3", 5),
        ]
    )
    assert deductions("b-0") == [("1", -1, "")]
    assert deductions("b-1") == [("1", -2, ""), ("2", -1, "")]
    assert deductions("b-2") == [("1", 0, Note.OVERSELL_BLOCKED), ("2", -3, Note.OVERSOLD)]
    assert deductions("b-3") == [("1", -1, "")]
    history = Tracking.objects.filter(item_id=scarce.id, reference_type="SALE_ORDER").order_by("id")
    assert [(t.reference_id, t.delta, t.requested, t.quantity_after) for t in history] == [
        ("b-1", -2, 2, 1),
        ("b-2", 0, 2, 1),
        ("b-3", -1, 1, 0),
    ]
    for item, on_hand in ((scarce, 0), (lenient, -2), (plenty, 98)):
        assert stock_of(item).quantity_on_hand == on_hand
        assert sum(Tracking.objects.filter(item_id=item.id).values_list("delta", flat=True)) == on_hand
    cogs = {
        row.key: (json.loads(row.value), row.headers["messageId"])
        for row in OutboxMessage.objects.filter(topic=topics.INVENTORY_COGS.name, key__in=["b-0", "b-1", "b-2", "b-3"])
    }
    assert {key: event["totalCostAmount"] for key, (event, _) in cogs.items()} == {"b-0": 7, "b-1": 2 * 500 + 7, "b-2": 3 * 40, "b-3": 500}
    assert [line["lineId"] for line in cogs["b-2"][0]["lines"]] == ["2"]  # the blocked line cost nothing
    assert len({message_id for _, message_id in cogs.values()}) == 4


def test_a_poison_message_inside_a_batch_is_parked_alone(make_topic, raw_producer):
    """Messages waiting before the consumer starts come in one poll: the batch fails on the poison
    one, the runner then handles them one at a time, so the poison one is parked and every other
    order is deducted once (the republished one too, once)."""
    topic, merchant = make_topic(), new_id()
    lamp, scarce = new_item(merchant, on_hand=10), new_item(merchant, on_hand=1)
    produce(raw_producer, topic, [paid("q-1", merchant, (lamp, 2))], key="k", headers={"messageId": "q-1"})
    produce(raw_producer, topic, [paid("q-2", merchant, (lamp, 0))], key="k", headers={"messageId": "q-2"})  # quantity 0
    produce(raw_producer, topic, [paid("q-1", merchant, (lamp, 2))], key="k", headers={"messageId": "q-1-republished"})
    produce(raw_producer, topic, [paid("q-3", merchant, (scarce, 2), (lamp, 1))], key="k", headers={"messageId": "q-3"})
    runner = RunningConsumer.registered(PAYMENT_CONSUMER, topic, max_retries=1)
    try:
        wait_for(lambda: len(deductions("q-3")) == 2, message="the messages after the poison one")
        parked = read_topic(f"{topic}.DLQ", expected=1, timeout=30)
    finally:
        runner.finish()
    assert [json.loads(record.value)["transaction"]["sourceId"] for record in parked] == ["q-2"]
    assert "quantity" in dict(parked[0].headers)["dlq.error"].decode()
    assert (deductions("q-1"), deductions("q-2")) == ([("1", -2, "")], [])
    assert deductions("q-3") == [("1", 0, Note.OVERSELL_BLOCKED), ("2", -1, "")]
    assert (stock_of(lamp).quantity_on_hand, stock_of(scarce).quantity_on_hand) == (7, 1)
