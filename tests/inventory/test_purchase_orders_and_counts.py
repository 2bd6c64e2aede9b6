"""Purchase orders through HTTP (DRAFT -> ORDERED -> PARTIALLY_RECEIVED -> RECEIVED, CANCELLED):
receiving adds stock, updates the moving-average cost, is idempotent per receipt id, refuses more
than ordered unless allowed, and publishes purchase-order.received once after the commit, also when
the broker was down at commit time (the outbox). Cycle-count tickets (OPEN -> COUNTED -> APPLIED or
CANCELLED) write the difference as a tracked change, ADJUSTMENT_NEUTRAL when the count matches, and
publish inventory.stock-adjusted for finance."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from apps.inventory import services
from apps.inventory.models import Item, Note, OutboxMessage, Tracking
from merchant_platform.messaging import topics
from merchant_platform.messaging.outbox import OutboxRelay
from merchant_platform.messaging.producer import PublishError, close_producer
from tests.inventory.conftest import new_item, stock_of
from tests.support.broker import read_topic
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
BASE = "/v1/api/inventory"


def create_order(client, merchant, *lines):
    body = {
        "merchantId": str(merchant),
        "supplier": "Lamps Ltd",
        "currency": "EUR",
        "lines": [{"inventoryItemId": str(item.id), "quantity": q, "unitCostAmount": cost} for item, q, cost in lines],
    }
    response = client.post(f"{BASE}/purchase-orders", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def received_events(order_id: str) -> list[dict]:
    records = read_topic(topics.PURCHASE_ORDER_RECEIVED.name, expected=None)
    return [json.loads(r.value) for r in records if json.loads(r.value)["purchaseOrderId"] == order_id]


def test_receiving_in_two_receipts_with_moving_average_and_one_event_each(shop):
    merchant, client = shop
    lamp = new_item(merchant, on_hand=10, unit_cost_amount=100)
    order = create_order(client, merchant, (lamp, 10, 130))
    assert order["status"] == "DRAFT"
    url = f"{BASE}/purchase-orders/{order['id']}"
    refused = client.post(
        f"{url}/receive", {"receiptId": "r-1", "lines": [{"inventoryItemId": str(lamp.id), "quantity": 4}]}, format="json"
    )
    assert refused.status_code == 409 and refused.json()["code"] == "ILLEGAL_TRANSITION"
    assert client.post(f"{url}/order").json()["status"] == "ORDERED"
    first = {"receiptId": "r-1", "lines": [{"inventoryItemId": str(lamp.id), "quantity": 4}]}
    answer = client.post(f"{url}/receive", first, format="json")
    assert answer.status_code == 200, answer.content
    assert (answer.json()["status"], answer.json()["lines"][0]["quantityReceived"]) == ("PARTIALLY_RECEIVED", 4)
    assert client.post(f"{url}/receive", first, format="json").json()["lines"][0]["quantityReceived"] == 4  # same receipt: once
    over = {"receiptId": "r-2", "lines": [{"inventoryItemId": str(lamp.id), "quantity": 7}]}
    refused = client.post(f"{url}/receive", over, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "VALIDATION_ERROR"
    rest = client.post(f"{url}/receive", {"receiptId": "r-2", "lines": [{"inventoryItemId": str(lamp.id), "quantity": 6}]}, format="json")
    assert rest.json()["status"] == "RECEIVED"
    assert stock_of(lamp).quantity_on_hand == 20
    # (10 x 100 + 4 x 130) / 14 = 108.57 -> 109; (14 x 109 + 6 x 130) / 20 = 115.3 -> 115
    assert Item.objects.get(pk=lamp.id).unit_cost_amount == 115
    assert list(
        Tracking.objects.filter(reference_type="PURCHASE_ORDER", reference_id=order["id"]).order_by("id").values_list("delta", flat=True)
    ) == [4, 6]
    wait_for(lambda: len(received_events(order["id"])) >= 2, timeout=30, message="the two events")
    events = received_events(order["id"])
    assert [(e["receiptId"], e["status"], e["lines"][0]["quantityReceived"]) for e in events] == [
        ("r-1", "PARTIALLY_RECEIVED", 4),
        ("r-2", "RECEIVED", 6),
    ]
    assert events[0]["lines"][0]["movingAverageUnitCostAmount"] == 109 and events[0]["totalCostAmount"] == 520
    assert client.post(f"{url}/cancel").status_code == 409


def test_over_receipt_when_allowed_and_cancel(shop):
    merchant, client = shop
    lamp = new_item(merchant)
    order = create_order(client, merchant, (lamp, 2, 50))
    url = f"{BASE}/purchase-orders/{order['id']}"
    client.post(f"{url}/order")
    body = {"receiptId": "r-9", "allowOverReceipt": True, "lines": [{"inventoryItemId": str(lamp.id), "quantity": 3}]}
    assert client.post(f"{url}/receive", body, format="json").json()["status"] == "RECEIVED"
    assert stock_of(lamp).quantity_on_hand == 3
    other = create_order(client, merchant, (lamp, 1, 50))
    assert client.post(f"{BASE}/purchase-orders/{other['id']}/cancel").json()["status"] == "CANCELLED"


@pytest.mark.parametrize(
    "lines",
    [[], [{"inventoryItemId": "1", "quantity": 0, "unitCostAmount": 1}], [{"inventoryItemId": "1", "quantity": 1, "unitCostAmount": -1}]],
)
def test_bad_purchase_orders_are_400(shop, lines):
    merchant, client = shop
    body = {"merchantId": str(merchant), "supplier": "S", "currency": "EUR", "lines": lines}
    response = client.post(f"{BASE}/purchase-orders", body, format="json")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"


def test_receipt_event_survives_a_broker_down_at_commit(shop):
    merchant, _ = shop
    lamp = new_item(merchant)
    order = services.purchase_order_create(
        merchant_id=merchant, supplier="S", currency="EUR", lines=[{"item_id": lamp.id, "quantity": 2, "unit_cost_amount": 10}]
    )
    services.purchase_order_place(purchase_order_id=order.id)
    close_producer()
    try:
        with override_settings(KAFKA_BOOTSTRAP_SERVERS=["127.0.0.1:1"]):
            services.purchase_order_receive(purchase_order_id=order.id, receipt_id="down", lines=[{"item_id": lamp.id, "quantity": 2}])
            with pytest.raises(PublishError):
                OutboxRelay(OutboxMessage).relay_pending()
            close_producer()
        row = OutboxMessage.objects.get(topic=topics.PURCHASE_ORDER_RECEIVED.name, value__contains=str(order.id))
        assert row.sent_at is None  # kept, not lost
    finally:
        close_producer()
    OutboxRelay(OutboxMessage).relay_pending()  # the broker is back
    wait_for(lambda: received_events(str(order.id)), timeout=30, message="the event")
    assert len(received_events(str(order.id))) == 1


def test_cycle_count_applies_the_difference_and_neutral_counts(shop):
    merchant, client = shop
    lamp = new_item(merchant, on_hand=10, unit_cost_amount=300)
    ticket = client.post(f"{BASE}/tickets", {"type": "CYCLE_COUNT", "inventoryItemId": str(lamp.id), "note": "weekly"}, format="json")
    assert ticket.status_code == 201, ticket.content
    url = f"{BASE}/tickets/{ticket.json()['id']}"
    assert client.post(f"{url}/apply").status_code == 409  # not counted yet
    assert client.post(f"{url}/count", {"countedQuantity": -1}, format="json").status_code == 400
    assert client.post(f"{url}/count", {"countedQuantity": 7}, format="json").json()["status"] == "COUNTED"
    applied = client.post(f"{url}/apply").json()
    assert (applied["status"], applied["expectedQuantity"], applied["difference"]) == ("APPLIED", 10, -3)
    assert stock_of(lamp).quantity_on_hand == 7
    assert client.post(f"{url}/cancel").status_code == 409
    neutral = services.ticket_create(item_id=lamp.id)
    services.ticket_count(ticket_id=neutral.id, counted_quantity=7)
    services.ticket_apply(ticket_id=neutral.id)
    rows = Tracking.objects.filter(reference_type="CYCLE_COUNT").filter(item_id=lamp.id).order_by("id")
    assert [(t.delta, t.quantity_after, t.note) for t in rows] == [(-3, 7, ""), (0, 7, Note.ADJUSTMENT_NEUTRAL)]
    events = [json.loads(m.value) for m in OutboxMessage.objects.filter(topic=topics.INVENTORY_ADJUSTED.name) if str(lamp.id) in m.value]
    assert [(e["kind"], e["totalValueAmount"]) for e in events] == [("ADJUSTMENT", 3000), ("CYCLE_COUNT", -900)]  # neutral: no event
    cancelled = services.ticket_create(item_id=lamp.id)
    assert client.post(f"{BASE}/tickets/{cancelled.id}/cancel").json()["status"] == "CANCELLED"
