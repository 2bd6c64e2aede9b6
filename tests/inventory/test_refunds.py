"""Refunded goods back on hand (issue 33): the payment.refunded consumer on the real broker, under the
kernel's runner. Each refund line with restock true comes back once (one RETURN tracking row per refund
and line, whatever the redeliveries), at the line's location or where its deduction took it from, at
the deduction's unit cost; restock false does nothing; a sale line never returns more than was
deducted; records of another merchant and malformed values are parked; inventory.returned carries the
cost finance reverses (outbox, contract-checked)."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import IntegrityError, connections, transaction
from django.test.utils import CaptureQueriesContext

from apps.inventory import services
from apps.inventory.consumers import REFUND_CONSUMER, payment_refunded
from apps.inventory.models import Item, Note, OutboxMessage, Stock, Tracking
from merchant_platform.messaging import Message, contracts, topics
from tests.inventory.conftest import new_id, new_item, stock_of
from tests.support.broker import produce, read_topic
from tests.support.consumers import RunningConsumer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def line(line_id: str, item, quantity: int, *, restock: bool = True, location=None) -> dict:
    """A refund line (contract REFUND_LINE): the sale line's lineId and variant."""
    return {
        "lineId": line_id,
        "variantId": str(item.variant_id),
        "quantity": quantity,
        "restock": restock,
        "locationId": None if location is None else str(location),
    }


def refunded(order: str, merchant: int, *lines: dict, refund_id: int | None = None, amount: int = 1000) -> dict:
    """A payment.refunded value as payment emits it (its contract PAYMENT_REFUNDED,
    merchant_platform/messaging/contracts.py): the transaction after the refund and the refund."""
    transaction_id, refund_id = str(new_id()), str(refund_id or new_id())
    common = {"merchantId": str(merchant), "sourceType": "ORDER", "sourceId": order, "financeAccountId": None}
    sale_lines = [{"lineId": ln["lineId"], "variantId": ln["variantId"], "quantity": ln["quantity"]} for ln in lines]
    return {
        "event": "refund.succeeded",
        "timestamp": "2026-11-29T11:00:00.000000+00:00",
        "source": "payment",
        "transaction": {
            **common,
            "id": transaction_id,
            "amount": 2500,
            "paidAmount": 2500,
            "taxAmount": 0,
            "currency": "EUR",
            "lines": sale_lines,
            "status": "PARTIALLY_REFUNDED",
            "createdAt": "2026-11-29T10:00:00+00:00",
            "settledAt": "2026-11-29T10:01:00+00:00",
            "cancelledAt": None,
            "refundedAmount": amount,
        },
        "refund": {
            **common,
            "id": refund_id,
            "transactionId": transaction_id,
            "amount": amount,
            "taxAmount": 0,
            "currency": "EUR",
            "reason": "damaged in transit",
            "status": "SUCCEEDED",
            "providerReference": None,
            "failureReason": None,
            "requestedBy": None,
            "lines": list(lines),
            "createdAt": "2026-11-29T10:59:00+00:00",
            "succeededAt": "2026-11-29T11:00:00+00:00",
            "failedAt": None,
        },
    }


def sold(order: str, merchant: int, *lines, location_id: int | None = None) -> list[Tracking]:
    """Deduct a paid order (what payment.success does): lines (item, quantity), line ids 1, 2, ...,
    at `location_id` (default: the merchant's default location)."""
    where = {} if location_id is None else {"location_id": location_id}
    return services.stock_deduct_order(
        order_id=order,
        merchant_id=merchant,
        lines=[{"line_id": str(n), "item_id": item.id, "quantity": q, **where} for n, (item, q) in enumerate(lines, 1)],
    )


def returns(refund_id: str) -> list[tuple]:
    rows = Tracking.objects.filter(operation="RETURN", reference_type="REFUND", reference_id=refund_id).order_by("reference_line")
    return [(t.reference_line, t.delta, t.requested, t.note) for t in rows]


def returned_events(refund_id: str) -> list[dict]:
    return [json.loads(m.value) for m in OutboxMessage.objects.filter(topic=topics.INVENTORY_RETURNED.name, key=refund_id)]


def on_hand(item, location_id: int) -> int:
    return Stock.objects.get(item_id=item.id, location_id=location_id).quantity_on_hand


def _message(value: dict, message_id: str, offset: int) -> Message:
    return Message("payment.refunded", 0, offset, value["transaction"]["id"], json.dumps(value).encode(), {"messageId": message_id})


def test_restocked_lines_come_back_once_at_the_deduction_or_the_chosen_location(make_topic, raw_producer):
    topic, merchant = make_topic(), new_id()
    lamp, desk, mug = (new_item(merchant, on_hand=10, unit_cost_amount=cost) for cost in (700, 2000, 50))
    backroom = services.location_create(merchant_id=merchant, name="Back room").id
    deducted = {t.reference_line: t for t in sold("SO-r1", merchant, (lamp, 3), (desk, 2), (mug, 4))}
    default = deducted["1"].location_id
    value = refunded("SO-r1", merchant, line("1", lamp, 2), line("2", desk, 1, location=backroom), line("3", mug, 4, restock=False))
    refund_id = value["refund"]["id"]
    runner = RunningConsumer.registered(REFUND_CONSUMER, topic)
    try:
        produce(raw_producer, topic, [value], key=value["transaction"]["id"], headers={"messageId": "refund-1"})
        wait_for(lambda: len(returns(refund_id)) == 2, message="the return")
        produce(raw_producer, topic, [value], key=value["transaction"]["id"], headers={"messageId": "refund-1"})  # redelivered
        produce(raw_producer, topic, [value], key=value["transaction"]["id"], headers={"messageId": "refund-1-again"})  # re-published
        later = refunded("SO-r1", merchant, line("1", lamp, 1))
        produce(raw_producer, topic, [later], key=later["transaction"]["id"], headers={"messageId": "refund-2"})
        wait_for(lambda: returns(later["refund"]["id"]), message="the next refund")
    finally:
        runner.finish()
    assert returns(refund_id) == [("1", 2, 2, ""), ("2", 1, 1, "")]
    rows = {t.reference_line: t for t in Tracking.objects.filter(operation="RETURN", reference_id=refund_id)}
    assert (rows["1"].location_id, rows["2"].location_id) == (default, backroom)
    assert (rows["1"].returned_from_id, rows["2"].returned_from_id) == (deducted["1"].id, deducted["2"].id)
    assert (rows["1"].unit_cost_amount, rows["1"].cost_currency) == (700, "EUR")
    assert (on_hand(lamp, default), on_hand(desk, default), on_hand(desk, backroom), on_hand(mug, default)) == (7 + 2 + 1, 8, 1, 6)
    assert not Tracking.objects.filter(operation="RETURN", item_id=mug.id).exists()
    for item in (lamp, desk, mug):
        assert sum(Tracking.objects.filter(item_id=item.id).values_list("delta", flat=True)) == sum(
            Stock.objects.filter(item_id=item.id).values_list("quantity_on_hand", flat=True)
        )
    (event,) = returned_events(refund_id)
    contracts.check(topics.INVENTORY_RETURNED.name, json.dumps(event))
    assert (event["refundId"], event["orderId"], event["merchantId"], event["currency"]) == (refund_id, "SO-r1", str(merchant), "EUR")
    assert event["totalCostAmount"] == 2 * 700 + 2000
    assert [(ln["lineId"], ln["quantity"], ln["unitCostAmount"], ln["costAmount"], ln["locationId"]) for ln in event["lines"]] == [
        ("1", 2, 700, 1400, str(default)),
        ("2", 1, 2000, 2000, str(backroom)),
    ]
    assert {ln["trackingId"] for ln in event["lines"]} == {str(rows["1"].id), str(rows["2"].id)}
    assert len(returned_events(later["refund"]["id"])) == 1


def test_goods_sold_from_a_location_deleted_since_come_back_to_the_default_one(merchant_id):
    lamp = new_item(merchant_id, on_hand=1)
    popup = services.location_create(merchant_id=merchant_id, name="Pop-up").id
    services.stock_adjust(item_id=lamp.id, delta=2, reason="pop-up stock", location_id=popup)
    sold("SO-d1", merchant_id, (lamp, 2), location_id=popup)
    services.location_delete(location_id=popup)
    value = refunded("SO-d1", merchant_id, line("1", lamp, 2))
    payment_refunded([_message(value, "m-d1", 0)])
    (row,) = Tracking.objects.filter(operation="RETURN", reference_id=value["refund"]["id"])
    assert (row.location_id, row.delta) == (stock_of(lamp).location_id, 2)
    assert (stock_of(lamp).quantity_on_hand, on_hand(lamp, popup)) == (3, 0)


def test_returns_are_costed_at_the_deduction_and_enter_the_moving_average(merchant_id):
    """The item's cost moved after the sale (a receipt at another cost): the return still costs what
    the deduction took out (finance reverses exactly its COGS), and the returned units enter the
    moving average at that cost."""
    lamp = new_item(merchant_id, on_hand=4, unit_cost_amount=100)
    sold("SO-c1", merchant_id, (lamp, 4))  # nothing left on hand
    order = services.purchase_order_create(
        merchant_id=merchant_id, supplier="Lamps Ltd", currency="EUR", lines=[{"item_id": lamp.id, "quantity": 2, "unit_cost_amount": 400}]
    )
    services.purchase_order_place(purchase_order_id=order.id)
    services.purchase_order_receive(purchase_order_id=order.id, receipt_id="r-1", lines=[{"item_id": lamp.id, "quantity": 2}])
    assert Item.objects.get(pk=lamp.id).unit_cost_amount == 400  # the stock was gone: the receipt's cost
    value = refunded("SO-c1", merchant_id, line("1", lamp, 3))
    payment_refunded([_message(value, "m-c1", 0)])
    (event,) = returned_events(value["refund"]["id"])
    assert (event["totalCostAmount"], event["lines"][0]["unitCostAmount"]) == (300, 100)
    lamp.refresh_from_db()
    assert (lamp.unit_cost_amount, lamp.cost_currency) == (220, "EUR")  # (2 x 400 + 3 x 100) / 5
    assert stock_of(lamp).quantity_on_hand == 5


def test_a_sale_line_never_returns_more_than_was_deducted(merchant_id):
    """Over all its refunds a sale line returns at most its deduction: what is left comes back, the
    excess is recorded RETURN_EXCEEDS_DEDUCTED (requested says what was asked) and costs nothing; a
    deduction that was blocked (OVERSELL_BLOCKED) has nothing to return."""
    lamp, scarce = new_item(merchant_id, on_hand=10, unit_cost_amount=700), new_item(merchant_id, on_hand=1, unit_cost_amount=90)
    assert [t.note for t in sold("SO-x1", merchant_id, (lamp, 3), (scarce, 2))] == ["", Note.OVERSELL_BLOCKED]
    first, second, third = (
        refunded("SO-x1", merchant_id, line("1", lamp, 2)),
        refunded("SO-x1", merchant_id, line("1", lamp, 2), line("2", scarce, 2)),
        refunded("SO-x1", merchant_id, line("1", lamp, 1)),
    )
    payment_refunded([_message(first, "m-x1", 0), _message(second, "m-x2", 1)])  # one batch: the second sees the first
    payment_refunded([_message(third, "m-x3", 2)])
    assert returns(first["refund"]["id"]) == [("1", 2, 2, "")]
    assert returns(second["refund"]["id"]) == [("1", 1, 2, Note.RETURN_EXCEEDS_DEDUCTED), ("2", 0, 2, Note.RETURN_EXCEEDS_DEDUCTED)]
    assert returns(third["refund"]["id"]) == [("1", 0, 1, Note.RETURN_EXCEEDS_DEDUCTED)]
    assert (stock_of(lamp).quantity_on_hand, stock_of(scarce).quantity_on_hand) == (10, 1)
    assert [(e["totalCostAmount"], [ln["lineId"] for ln in e["lines"]]) for e in returned_events(second["refund"]["id"])] == [(700, ["1"])]
    assert returned_events(third["refund"]["id"]) == []  # nothing restocked, nothing to reverse


def test_records_of_another_merchant_are_refused(make_topic, raw_producer):
    """A refund naming another merchant's location is parked at once; one naming an order only
    another merchant has deducted finds no deduction of its own merchant (retried, then parked).
    Neither touches any stock."""
    topic, merchant, other = make_topic(), new_id(), new_id()
    lamp = new_item(merchant, on_hand=10)
    services.location_ensure_default(merchant_id=other)
    elsewhere = services.location_create(merchant_id=other, name="Their shop").id
    sold("SO-t1", merchant, (lamp, 3))
    foreign_location = refunded("SO-t1", merchant, line("1", lamp, 1, location=elsewhere))
    foreign_order = refunded("SO-t1", other, line("1", lamp, 1))
    good = refunded("SO-t1", merchant, line("1", lamp, 1))
    runner = RunningConsumer.registered(REFUND_CONSUMER, topic, max_retries=1)
    try:
        for value in (foreign_location, foreign_order, good):
            produce(raw_producer, topic, [value], key="k")
        wait_for(lambda: returns(good["refund"]["id"]), message="the refund after the refused ones")
        parked = read_topic(f"{topic}.DLQ", expected=2, timeout=30)
    finally:
        runner.finish()
    errors = {json.loads(r.value)["refund"]["id"]: dict(r.headers)["dlq.error"].decode() for r in parked}
    assert "another merchant" in errors[foreign_location["refund"]["id"]]
    assert "No deduction" in errors[foreign_order["refund"]["id"]] and "SO-t1" in errors[foreign_order["refund"]["id"]]
    assert returns(foreign_location["refund"]["id"]) == returns(foreign_order["refund"]["id"]) == []
    assert stock_of(lamp).quantity_on_hand == 7 + 1
    assert not Tracking.objects.filter(merchant_id=other).exists()


def test_a_refund_line_that_contradicts_its_sale_is_refused_whole(merchant_id):
    """A line whose sale line took another variant, or a line never deducted, refuses the whole
    refund: nothing of it comes back, so a refund is returned at once or not at all."""
    lamp, desk = new_item(merchant_id, on_hand=5), new_item(merchant_id, on_hand=5)
    sold("SO-m1", merchant_id, (lamp, 2), (desk, 1))

    def lamp_refund(*line_ids: str) -> dict:
        """A refund of SO-m1, one lamp on each line named, as the consumer hands it over."""
        lines = [{"line_id": line_id, "variant_id": lamp.variant_id, "quantity": 1, "restock": True} for line_id in line_ids]
        return {"refund_id": new_id(), "merchant_id": merchant_id, "order_id": "SO-m1", "lines": lines}

    with pytest.raises(services.RefundLineMismatch):
        services.stock_return_refunds(refunds=[lamp_refund("1", "2")])
    with pytest.raises(services.SaleLineNotDeducted) as unknown:
        services.stock_return_refunds(refunds=[lamp_refund("1", "9")])
    assert unknown.value.extra["lines"][0]["lineId"] == "9"
    assert not Tracking.objects.filter(merchant_id=merchant_id, operation="RETURN").exists()
    assert (stock_of(lamp).quantity_on_hand, stock_of(desk).quantity_on_hand) == (3, 4)


def test_malformed_messages_are_parked_naming_the_fields_and_later_ones_flow(make_topic, raw_producer):
    topic, merchant = make_topic(), new_id()
    lamp = new_item(merchant, on_hand=5)
    sold("SO-p1", merchant, (lamp, 2))
    no_refund = {"event": "refund.succeeded", "transaction": {"merchantId": str(merchant), "sourceId": "SO-p1"}}
    quantity_zero = refunded("SO-p1", merchant, line("1", lamp, 0))
    restock_text = refunded("SO-p1", merchant, {**line("1", lamp, 1), "restock": "yes"})
    other_sale = refunded("SO-p1", merchant, line("1", lamp, 1))
    other_sale["transaction"]["sourceId"] = "SO-p2"
    good = refunded("SO-p1", merchant, line("1", lamp, 1))
    produce(raw_producer, topic, [no_refund, quantity_zero, restock_text, b"not json", other_sale, good], key="k")
    runner = RunningConsumer.registered(REFUND_CONSUMER, topic, max_retries=1)  # one poll: the batch fails, then one at a time
    try:
        wait_for(lambda: returns(good["refund"]["id"]), message="the refund after the poison ones")
        parked = read_topic(f"{topic}.DLQ", expected=5, timeout=30)
    finally:
        runner.finish()
    errors = [dict(record.headers)["dlq.error"].decode() for record in parked]
    assert len(errors) == 5
    assert "refund" in errors[0] and "quantity" in errors[1] and "restock" in errors[2] and "sourceId" in errors[4]
    assert stock_of(lamp).quantity_on_hand == 3 + 1


def test_one_batch_takes_a_fixed_number_of_statements(merchant_id):
    """A batch handler: the refunds of one poll are returned with the same statements whatever their
    count (one order lock, one read each of earlier returns, deductions, items, returned totals and
    on hand, one stock lock, one COPY, one outbox INSERT...)."""
    items = [new_item(merchant_id, on_hand=50, unit_cost_amount=10 + n) for n in range(6)]
    for n, item in enumerate(items):
        sold(f"SO-q{n}", merchant_id, (item, 5))

    def batch(orders: range, offset: int) -> int:
        messages = [_message(refunded(f"SO-q{n}", merchant_id, line("1", items[n], 2)), f"q-{offset}-{n}", offset + n) for n in orders]
        with CaptureQueriesContext(connections["inventory"]) as queries:
            payment_refunded(messages)
        return len(queries)

    assert batch(range(1), 0) == batch(range(1, 6), 10)
    assert [stock_of(item).quantity_on_hand for item in items] == [47] * 6


def test_the_tracking_routes_show_returns(shop):
    merchant, employee = shop
    lamp = new_item(merchant, on_hand=10)
    (deduction,) = sold("SO-a1", merchant, (lamp, 3))
    value = refunded("SO-a1", merchant, line("1", lamp, 2))
    payment_refunded([_message(value, "m-a1", 0)])
    base = "/v1/api/inventory/tracking"
    listed = employee.get(base, {"operation": "RETURN", "referenceType": "REFUND", "inventoryItemId": str(lamp.id)})
    assert listed.status_code == 200, listed.content
    (row,) = listed.json()["results"]
    assert (row["operation"], row["referenceType"], row["referenceId"], row["referenceLine"]) == (
        "RETURN",
        "REFUND",
        value["refund"]["id"],
        "1",
    )
    assert (row["delta"], row["quantityAfter"], row["unitCostAmount"], row["returnedFromId"]) == (2, 9, 100, str(deduction.id))
    assert employee.get(f"{base}/{row['id']}").json()["returnedFromId"] == str(deduction.id)
    by_reference = employee.get(base, {"referenceId": value["refund"]["id"]}).json()["results"]
    assert [r["id"] for r in by_reference] == [row["id"]]
    assert employee.get(base, {"operation": "DEDUCT", "inventoryItemId": str(lamp.id)}).json()["results"][0]["returnedFromId"] is None
    assert employee.get(base, {"note": "RETURN_EXCEEDS_DEDUCTED", "inventoryItemId": str(lamp.id)}).json()["results"] == []


def test_concurrent_refunds_of_one_sale_line_never_return_more_than_was_deducted(merchant_id):
    """Eight refunds of the same sale line at once, each asking back its whole quantity, and each
    delivered twice: the order's lock queues them (each reads earlier returns only once it holds
    it), so the line returns its deduction exactly once over all of them and each refund line is
    recorded once."""
    lamp = new_item(merchant_id, on_hand=10, unit_cost_amount=300)
    sold("SO-k1", merchant_id, (lamp, 4))
    values = [refunded("SO-k1", merchant_id, line("1", lamp, 4)) for _ in range(8)]
    barrier, errors = threading.Barrier(16), []

    def deliver(value: dict, message_id: str):
        try:
            barrier.wait()
            payment_refunded([_message(value, message_id, 0)])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=deliver, args=(v, f"k-{n}-{copy}")) for n, v in enumerate(values) for copy in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    rows = Tracking.objects.filter(operation="RETURN", item_id=lamp.id)
    assert rows.count() == 8
    assert sorted(rows.values_list("delta", flat=True)) == [0] * 7 + [4]
    assert stock_of(lamp).quantity_on_hand == 10
    events = [e for v in values for e in returned_events(v["refund"]["id"])]
    assert [e["totalCostAmount"] for e in events] == [1200]


def test_the_database_holds_one_return_per_refund_line_naming_its_deduction(merchant_id):
    """Whatever code writes them: a second RETURN row for the same refund line is refused by the
    tracking unique key, and a RETURN row without its deduction by a CHECK constraint."""
    lamp = new_item(merchant_id, on_hand=5)
    sold("SO-u1", merchant_id, (lamp, 2))
    value = refunded("SO-u1", merchant_id, line("1", lamp, 1))
    payment_refunded([_message(value, "m-u1", 0)])
    (row,) = Tracking.objects.filter(operation="RETURN", reference_id=value["refund"]["id"])
    fields = {f.attname: getattr(row, f.attname) for f in Tracking._meta.concrete_fields if f.attname != "id"}
    for changed, constraint in (({}, "tracking_once_per_merchant"), ({"returned_from_id": None}, "tracking_return_names_its_deduction")):
        with pytest.raises(IntegrityError, match=constraint), transaction.atomic(using="inventory"):
            Tracking.objects.create(**{**fields, **changed, **({"reference_line": "2"} if changed else {})})
