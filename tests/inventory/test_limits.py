"""What one inventory request may hold: at most MAX_LINES lines on a purchase order and on a receipt
(so one purchase-order.received event stays far below the producer's 1 MiB), and amounts and
quantities within merchant_platform/money.py's limits (400 AMOUNT_TOO_LARGE, 409 where a stock total
would pass MAX_QUANTITY), held by CHECK constraints in the tables too."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, connections, transaction

from apps.inventory import services
from apps.inventory.models import OutboxMessage
from apps.inventory.services import MAX_LINES
from merchant_platform.messaging import topics
from merchant_platform.money import MAX_AMOUNT, MAX_QUANTITY
from tests.inventory.conftest import new_item, stock_of

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/inventory"


def _order_body(merchant, lines):
    return {"merchantId": str(merchant), "supplier": "S", "currency": "EUR", "lines": lines}


def test_a_purchase_order_or_receipt_over_the_line_limit_is_400(shop):
    merchant, client = shop
    lines = [{"inventoryItemId": str(n), "quantity": 1, "unitCostAmount": 1} for n in range(1, MAX_LINES + 2)]
    response = client.post(f"{BASE}/purchase-orders", _order_body(merchant, lines), format="json")
    assert response.status_code == 400, response.content
    assert [error["field"] for error in response.json()["errors"]] == ["lines"]
    lamp = new_item(merchant)
    order = services.purchase_order_create(
        merchant_id=merchant, supplier="S", currency="EUR", lines=[{"item_id": lamp.id, "quantity": 1, "unit_cost_amount": 1}]
    )
    receipt = {"receiptId": "r", "lines": [{"inventoryItemId": str(n), "quantity": 1} for n in range(1, MAX_LINES + 2)]}
    response = client.post(f"{BASE}/purchase-orders/{order.id}/receive", receipt, format="json")
    assert response.status_code == 400 and [error["field"] for error in response.json()["errors"]] == ["lines"]


def test_a_receipt_of_the_most_lines_makes_one_event_well_under_a_mebibyte(shop):
    merchant, _ = shop
    items = [new_item(merchant, unit_cost_amount=None) for _ in range(MAX_LINES)]
    order = services.purchase_order_create(
        merchant_id=merchant,
        supplier="S" * 200,
        currency="EUR",
        lines=[
            {"item_id": item.id, "quantity": MAX_QUANTITY, "unit_cost_amount": MAX_AMOUNT // (MAX_QUANTITY * MAX_LINES)} for item in items
        ],
    )
    services.purchase_order_place(purchase_order_id=order.id)
    receipt_id = "r" * 64
    services.purchase_order_receive(
        purchase_order_id=order.id, receipt_id=receipt_id, lines=[{"item_id": item.id, "quantity": MAX_QUANTITY} for item in items]
    )
    (row,) = [r for r in OutboxMessage.objects.filter(topic=topics.PURCHASE_ORDER_RECEIVED.name) if receipt_id in r.value]
    assert len(json.dumps(json.loads(row.value)).encode()) < 512 * 1024


@pytest.mark.parametrize(
    "line",
    [
        {"quantity": 1, "unitCostAmount": MAX_AMOUNT + 1},
        {"quantity": 2, "unitCostAmount": MAX_AMOUNT // 2 + 1},  # the line's value passes MAX_AMOUNT
    ],
)
def test_a_purchase_order_line_over_max_amount_is_400_amount_too_large(shop, line):
    merchant, client = shop
    lamp = new_item(merchant)
    response = client.post(f"{BASE}/purchase-orders", _order_body(merchant, [{"inventoryItemId": str(lamp.id), **line}]), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "AMOUNT_TOO_LARGE"


def test_a_quantity_over_max_quantity_is_400(shop):
    merchant, client = shop
    lamp = new_item(merchant)
    body = {"inventoryItemId": str(lamp.id), "delta": MAX_QUANTITY + 1, "reason": "x"}
    assert client.post(f"{BASE}/stock/adjustments", body, format="json").status_code == 400


def test_stock_on_hand_past_max_quantity_is_409(shop):
    merchant, client = shop
    lamp = new_item(merchant, on_hand=MAX_QUANTITY, unit_cost_amount=None)
    response = client.post(f"{BASE}/stock/adjustments", {"inventoryItemId": str(lamp.id), "delta": 1, "reason": "x"}, format="json")
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "QUANTITY_LIMIT_EXCEEDED"
    assert stock_of(lamp).quantity_on_hand == MAX_QUANTITY


def test_an_adjustment_whose_value_passes_max_amount_is_400(shop):
    merchant, client = shop
    lamp = new_item(merchant, unit_cost_amount=MAX_AMOUNT)
    response = client.post(f"{BASE}/stock/adjustments", {"inventoryItemId": str(lamp.id), "delta": 2, "reason": "x"}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "AMOUNT_TOO_LARGE"


def test_the_tables_hold_the_limits(shop):
    merchant, _ = shop
    lamp = new_item(merchant, on_hand=1)
    for statement in (
        "UPDATE stock SET quantity_on_hand = %s WHERE id = %s",
        "UPDATE stock SET reserved = %s WHERE id = %s",
    ):
        with pytest.raises(IntegrityError), transaction.atomic(using="inventory"), connections["inventory"].cursor() as cursor:
            cursor.execute(statement, [MAX_QUANTITY + 1, stock_of(lamp).id])
    with pytest.raises(IntegrityError), transaction.atomic(using="inventory"), connections["inventory"].cursor() as cursor:
        cursor.execute("UPDATE item SET unit_cost_amount = %s WHERE id = %s", [MAX_AMOUNT + 1, lamp.id])
