"""Inventory through HTTP: locations, items (allowOversell), stock reads per item, per location and
per merchant with filters and paging, adjustments and their tracking rows, tenant isolation (another
merchant's record answers 404) and bad input (4xx in the shared error shape, never a 500)."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.utils import timezone

from apps.inventory import services
from apps.inventory.models import IdempotencyKey, Location, Tracking
from tests.inventory.conftest import new_id, new_item, stock_of
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/inventory"


@pytest.fixture
def shop(seeded):
    """A merchant with its default location, its owner-admin and an employee."""
    merchant = new_id()
    services.location_ensure_default(merchant_id=merchant)
    return merchant, make_caller(roles=[("ADMIN", merchant)]).client(), make_caller(roles=[("EMPLOYEE", merchant)]).client()


def test_locations_crud_and_the_default_location(shop):
    merchant, admin, employee = shop
    created = admin.post(f"{BASE}/locations", {"merchantId": str(merchant), "name": "Back room", "code": "BR"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["merchantId"], body["name"], body["code"], body["isDefault"]) == (str(merchant), "Back room", "BR", False)
    listed = employee.get(f"{BASE}/locations", {"merchantId": str(merchant)}).json()
    assert [(row["name"], row["isDefault"]) for row in listed["results"]] == [("Default", True), ("Back room", False)]
    renamed = admin.patch(f"{BASE}/locations/{body['id']}", {"name": "Cellar"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Cellar"
    assert employee.patch(f"{BASE}/locations/{body['id']}", {"name": "x"}, format="json").status_code == 403
    assert admin.delete(f"{BASE}/locations/{body['id']}").status_code == 204
    assert not Location.objects.filter(pk=int(body["id"])).exists()


def test_a_location_holding_stock_cannot_be_deleted(shop):
    merchant, admin, _ = shop
    item = new_item(merchant, on_hand=3)
    response = admin.delete(f"{BASE}/locations/{stock_of(item).location_id}")
    assert response.status_code == 409 and response.json()["code"] == "LOCATION_NOT_EMPTY"


def test_items_list_and_allow_oversell(shop):
    merchant, admin, employee = shop
    item = new_item(merchant, sku="LAMP-1")
    new_item(merchant, sku="DESK-1")
    listed = employee.get(f"{BASE}/items", {"merchantId": str(merchant), "ordering": "sku"}).json()
    assert [row["sku"] for row in listed["results"]] == ["DESK-1", "LAMP-1"]
    assert employee.patch(f"{BASE}/items/{item.id}", {"allowOversell": True}, format="json").status_code == 403
    changed = admin.patch(f"{BASE}/items/{item.id}", {"allowOversell": True}, format="json")
    assert changed.status_code == 200 and changed.json()["allowOversell"] is True
    refused = admin.patch(f"{BASE}/items/{item.id}", {"sku": "X"}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "VALIDATION_ERROR"


def test_stock_reads_per_item_location_and_merchant_with_paging(shop):
    merchant, _, employee = shop
    items = [new_item(merchant, on_hand=n + 1) for n in range(3)]
    back = services.location_create(merchant_id=merchant, name="Back")
    services.stock_adjust(item_id=items[0].id, location_id=back.id, delta=7, reason="found")
    everything = employee.get(f"{BASE}/stock", {"merchantId": str(merchant), "ordering": "quantityOnHand"}).json()
    assert [row["quantityOnHand"] for row in everything["results"]] == [1, 2, 3, 7]
    per_item = employee.get(f"{BASE}/stock", {"inventoryItemId": str(items[0].id)}).json()["results"]
    assert sorted((row["locationId"], row["quantityOnHand"], row["available"]) for row in per_item) == sorted(
        [(str(stock_of(items[0]).location_id), 1, 1), (str(back.id), 7, 7)]
    )
    per_location = employee.get(f"{BASE}/stock", {"locationId": str(back.id)}).json()["results"]
    assert [row["inventoryItemId"] for row in per_location] == [str(items[0].id)]
    assert [
        r["quantityOnHand"] for r in employee.get(f"{BASE}/stock", {"merchantId": str(merchant), "minAvailable": 3}).json()["results"]
    ] == [3, 7]
    page = employee.get(f"{BASE}/stock", {"merchantId": str(merchant), "pageSize": 3, "page": 2}).json()
    assert (page["count"], len(page["results"])) == (4, 1)
    one = employee.get(f"{BASE}/stock/{per_location[0]['id']}").json()
    assert (one["quantityOnHand"], one["reserved"], one["available"]) == (7, 0, 7)


def test_adjustments_write_tracking_rows(shop):
    merchant, _, employee = shop
    item = new_item(merchant, on_hand=10)
    response = employee.post(f"{BASE}/stock/adjustments", {"inventoryItemId": str(item.id), "delta": -4, "reason": "broken"}, format="json")
    assert response.status_code == 201, response.content
    row = response.json()
    assert (row["operation"], row["delta"], row["quantityAfter"], row["referenceType"], row["reason"]) == (
        "ADJUST",
        -4,
        6,
        "ADJUSTMENT",
        "broken",
    )
    too_much = employee.post(f"{BASE}/stock/adjustments", {"inventoryItemId": str(item.id), "delta": -7, "reason": "lost"}, format="json")
    assert too_much.status_code == 409 and too_much.json()["code"] == "INSUFFICIENT_STOCK"
    tracking = employee.get(f"{BASE}/tracking", {"inventoryItemId": str(item.id), "ordering": "id"}).json()["results"]
    assert [(t["delta"], t["quantityAfter"]) for t in tracking] == [(10, 10), (-4, 6)]
    assert stock_of(item).quantity_on_hand == sum(t.delta for t in Tracking.objects.filter(item_id=item.id)) == 6


@pytest.mark.parametrize(
    "body",
    [
        {"delta": 0, "reason": "x"},
        {"delta": "3", "reason": "x"},
        {"delta": 1.5, "reason": "x"},
        {"delta": 3},
        {"delta": 3, "reason": "x", "extra": 1},
    ],
)
def test_bad_adjustments_are_400(shop, body):
    merchant, _, employee = shop
    item = new_item(merchant)
    response = employee.post(f"{BASE}/stock/adjustments", {"inventoryItemId": str(item.id), **body}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"


def test_unknown_item_or_location_is_404(shop):
    merchant, _, employee = shop
    item = new_item(merchant)
    unknown = employee.post(f"{BASE}/stock/adjustments", {"inventoryItemId": "12345", "delta": 1, "reason": "x"}, format="json")
    assert unknown.status_code == 404 and unknown.json()["code"] == "NOT_FOUND"
    elsewhere = services.location_create(merchant_id=new_id(), name="Theirs")
    body = {"inventoryItemId": str(item.id), "locationId": str(elsewhere.id), "delta": 1, "reason": "x"}
    response = employee.post(f"{BASE}/stock/adjustments", body, format="json")
    assert response.status_code == 404


def test_another_merchants_records_answer_404(shop):
    _, admin, _ = shop
    other = new_id()
    theirs = new_item(other, on_hand=2)
    location = services.location_ensure_default(merchant_id=other)
    row = Tracking.objects.filter(item_id=theirs.id).latest("id")
    ticket = services.ticket_create(item_id=theirs.id)
    order = services.purchase_order_create(
        merchant_id=other, supplier="S", currency="EUR", lines=[{"item_id": theirs.id, "quantity": 1, "unit_cost_amount": 1}]
    )
    for url in (
        f"{BASE}/items/{theirs.id}",
        f"{BASE}/stock/{stock_of(theirs).id}",
        f"{BASE}/locations/{location.id}",
        f"{BASE}/tracking/{row.id}",
        f"{BASE}/tickets/{ticket.id}",
        f"{BASE}/purchase-orders/{order.id}",
    ):
        assert admin.get(url).status_code == 404, url
    for route in ("tracking", "tickets", "purchase-orders", "items", "locations"):
        assert admin.get(f"{BASE}/{route}", {"merchantId": str(other)}).json()["results"] == [], route
    assert admin.post(f"{BASE}/tickets/{ticket.id}/cancel").status_code == 404
    receipt = {"receiptId": "r", "lines": [{"inventoryItemId": str(theirs.id), "quantity": 1}]}
    assert admin.post(f"{BASE}/purchase-orders/{order.id}/receive", receipt, format="json").status_code == 404
    ticket_body = {"inventoryItemId": str(theirs.id)}
    assert admin.post(f"{BASE}/tickets", ticket_body, format="json").status_code == 404
    assert admin.get(f"{BASE}/stock", {"merchantId": str(other)}).json()["results"] == []
    assert admin.patch(f"{BASE}/items/{theirs.id}", {"allowOversell": True}, format="json").status_code == 404
    adjust = admin.post(f"{BASE}/stock/adjustments", {"inventoryItemId": str(theirs.id), "delta": 1, "reason": "x"}, format="json")
    assert adjust.status_code == 404
    assert admin.post(f"{BASE}/locations", {"merchantId": str(other), "name": "x"}, format="json").status_code == 403


def test_idempotency_key_replays_adjustments_and_purchase_orders(shop):
    """docs/architecture.md section 10: the same key and body replay the first response; another body is
    422; a first request still running is 409."""
    merchant, admin, employee = shop
    item = new_item(merchant, on_hand=10)
    body = {"inventoryItemId": str(item.id), "delta": -2, "reason": "broken"}
    first = employee.post(f"{BASE}/stock/adjustments", body, format="json", HTTP_IDEMPOTENCY_KEY="adj-1")
    again = employee.post(f"{BASE}/stock/adjustments", body, format="json", HTTP_IDEMPOTENCY_KEY="adj-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert stock_of(item).quantity_on_hand == 8  # applied once
    reused = employee.post(f"{BASE}/stock/adjustments", {**body, "delta": -3}, format="json", HTTP_IDEMPOTENCY_KEY="adj-1")
    assert reused.status_code == 422 and reused.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    bad = employee.post(f"{BASE}/stock/adjustments", body, format="json", HTTP_IDEMPOTENCY_KEY="bad key")
    assert bad.status_code == 400
    refused = {"inventoryItemId": str(item.id), "delta": -50, "reason": "lost"}
    assert employee.post(f"{BASE}/stock/adjustments", refused, format="json", HTTP_IDEMPOTENCY_KEY="adj-2").status_code == 409
    assert employee.post(f"{BASE}/stock/adjustments", body, format="json", HTTP_IDEMPOTENCY_KEY="adj-2").status_code == 201  # released
    order = {
        "merchantId": str(merchant),
        "supplier": "S",
        "currency": "EUR",
        "lines": [{"inventoryItemId": str(item.id), "quantity": 1, "unitCostAmount": 5}],
    }
    made = admin.post(f"{BASE}/purchase-orders", order, format="json", HTTP_IDEMPOTENCY_KEY="po-1")
    replayed = admin.post(f"{BASE}/purchase-orders", order, format="json", HTTP_IDEMPOTENCY_KEY="po-1")
    assert made.status_code == replayed.status_code == 201 and made.json()["id"] == replayed.json()["id"]
    assert stock_of(item).quantity_on_hand == 6


def test_a_running_first_request_makes_the_second_409(shop):
    merchant, _, _ = shop
    caller = make_caller(roles=[("EMPLOYEE", merchant)])
    item = new_item(merchant, on_hand=3)
    body = {"inventoryItemId": str(item.id), "delta": 1, "reason": "found"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    IdempotencyKey.objects.create(
        caller=f"user:{caller.user_id}", operation="stock.adjust", key="busy", request_hash=digest, started_at=timezone.now()
    )
    response = caller.client().post(f"{BASE}/stock/adjustments", body, format="json", HTTP_IDEMPOTENCY_KEY="busy")
    assert response.status_code == 409 and response.json()["code"] == "IDEMPOTENCY_KEY_IN_PROGRESS"
