"""An item's unit cost has a currency of its own (its cost currency): purchase orders in another
currency are refused while the item holds stock at a cost (409 CURRENCY_MISMATCH naming the line),
a cost starts afresh in the receipt's currency once the stock is gone, a variant that changes its
sale currency keeps its cost's currency, and the COGS and adjustment events carry the cost's
currency, not the sale's."""

from __future__ import annotations

import json

import pytest

from apps.inventory import services
from apps.inventory.models import Item, OutboxMessage
from merchant_platform.messaging import topics
from tests.inventory.conftest import new_item, stock_of

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/inventory"


def _order(client, merchant, currency, *lines):
    body = {
        "merchantId": str(merchant),
        "supplier": "S",
        "currency": currency,
        "lines": [{"inventoryItemId": str(item.id), "quantity": q, "unitCostAmount": cost} for item, q, cost in lines],
    }
    return client.post(f"{BASE}/purchase-orders", body, format="json")


def _receive(order_id: int, receipt: str, *lines):
    services.purchase_order_place(purchase_order_id=order_id)
    return services.purchase_order_receive(
        purchase_order_id=order_id, receipt_id=receipt, lines=[{"item_id": item.id, "quantity": q} for item, q in lines]
    )


def test_a_purchase_order_in_another_currency_than_the_cost_is_409_naming_the_line(shop):
    merchant, client = shop
    desk = new_item(merchant, on_hand=1, unit_cost_amount=5)
    lamp = new_item(merchant, on_hand=10, unit_cost_amount=100)  # costed in EUR
    refused = _order(client, merchant, "JPY", (desk, 1, 5), (lamp, 5, 15000))
    assert refused.status_code == 409, refused.content
    body = refused.json()
    assert body["code"] == "CURRENCY_MISMATCH"
    assert [(line["index"], line["inventoryItemId"], line["costCurrency"]) for line in body["lines"]] == [
        (0, str(desk.id), "EUR"),
        (1, str(lamp.id), "EUR"),
    ]
    assert _order(client, merchant, "EUR", (lamp, 5, 130)).status_code == 201


def test_a_receipt_never_averages_two_currencies(shop):
    """A JPY order made while the stock was gone, received after EUR stock came back: refused."""
    merchant, client = shop
    lamp = new_item(merchant, unit_cost_amount=None)
    made = _order(client, merchant, "JPY", (lamp, 5, 15000))
    assert made.status_code == 201
    services.stock_adjust(item_id=lamp.id, delta=3, reason="found")
    euro = services.purchase_order_create(
        merchant_id=merchant, supplier="S", currency="EUR", lines=[{"item_id": lamp.id, "quantity": 2, "unit_cost_amount": 100}]
    )
    _receive(euro.id, "r-eur", (lamp, 2))
    with pytest.raises(services.CurrencyMismatch):
        _receive(int(made.json()["id"]), "r-jpy", (lamp, 5))
    lamp.refresh_from_db()
    assert (lamp.unit_cost_amount, lamp.cost_currency, stock_of(lamp).quantity_on_hand) == (100, "EUR", 5)


def test_the_cost_starts_afresh_in_the_new_currency_once_the_stock_is_gone(shop):
    merchant, _ = shop
    lamp = new_item(merchant, on_hand=2, unit_cost_amount=100)
    services.item_sync(variant_id=lamp.variant_id, merchant_id=merchant, sku=lamp.sku, currency="JPY", unit_cost_amount=9000)
    lamp.refresh_from_db()
    assert (lamp.currency, lamp.unit_cost_amount, lamp.cost_currency) == ("JPY", 100, "EUR")  # the cost keeps its currency
    services.stock_adjust(item_id=lamp.id, delta=-2, reason="sold off")
    order = services.purchase_order_create(
        merchant_id=merchant, supplier="S", currency="JPY", lines=[{"item_id": lamp.id, "quantity": 4, "unit_cost_amount": 15000}]
    )
    _receive(order.id, "r-1", (lamp, 4))
    lamp.refresh_from_db()
    assert (lamp.unit_cost_amount, lamp.cost_currency) == (15000, "JPY")


def test_cogs_and_adjustments_carry_the_cost_currency_not_the_sale_currency(shop):
    merchant, _ = shop
    lamp = new_item(merchant, on_hand=5, unit_cost_amount=100)  # cost in EUR
    services.item_sync(variant_id=lamp.variant_id, merchant_id=merchant, sku=lamp.sku, currency="JPY")  # now sold in yen
    services.stock_deduct_order(order_id="SO-C1", merchant_id=merchant, lines=[{"line_id": "1", "item_id": lamp.id, "quantity": 2}])
    services.stock_adjust(item_id=lamp.id, delta=-1, reason="broken")
    cogs = [json.loads(row.value) for row in OutboxMessage.objects.filter(topic=topics.INVENTORY_COGS.name, key="SO-C1")]
    assert [(event["currency"], event["totalCostAmount"]) for event in cogs] == [("EUR", 200)]
    adjusted = [
        json.loads(row.value)
        for row in OutboxMessage.objects.filter(topic=topics.INVENTORY_ADJUSTED.name)
        if str(lamp.id) in row.value and "broken" in row.value
    ]
    assert [(event["currency"], event["totalValueAmount"]) for event in adjusted] == [("EUR", -100)]
    assert Item.objects.get(pk=lamp.id).currency == "JPY"
