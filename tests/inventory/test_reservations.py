"""Commerce's internal reservation API (HTTP Basic, spec 5): all-or-nothing reservations of a sale
order's lines, idempotent by order and line; release; commit (deduct now, once, whichever of commit
and payment.success comes first); expiry released by the beat task."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.inventory import services
from apps.inventory.models import Note, Reservation, Tracking
from apps.inventory.tasks import expire_reservations
from merchant_platform.errors import NotFound
from tests.inventory.conftest import new_id, new_item, stock_of
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
RESERVATIONS = "/v1/api/inventory/internal/reservations"


def reserve_body(merchant: int, order: str, *lines) -> dict:
    return {
        "orderId": order,
        "merchantId": str(merchant),
        "lines": [{"lineId": str(n), "inventoryItemId": str(item.id), "quantity": q} for n, (item, q) in enumerate(lines, 1)],
    }


def test_reserve_is_all_or_nothing_and_idempotent(service_client):
    merchant = new_id()
    lamp, desk = new_item(merchant, on_hand=5), new_item(merchant, on_hand=1)
    refused = service_client.post(RESERVATIONS, reserve_body(merchant, "o-1", (lamp, 2), (desk, 2)), format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "INSUFFICIENT_STOCK"
    assert (stock_of(lamp).reserved, Reservation.objects.filter(order_id="o-1").count()) == (0, 0)  # nothing held
    body = reserve_body(merchant, "o-1", (lamp, 2), (desk, 1))
    made = service_client.post(RESERVATIONS, body, format="json")
    assert made.status_code == 201, made.content
    assert [(r["lineId"], r["quantity"], r["status"]) for r in made.json()] == [("1", 2, "ACTIVE"), ("2", 1, "ACTIVE")]
    again = service_client.post(RESERVATIONS, body, format="json")
    assert again.status_code == 201 and [r["id"] for r in again.json()] == [r["id"] for r in made.json()]
    assert (stock_of(lamp).reserved, stock_of(lamp).quantity_on_hand, stock_of(desk).reserved) == (2, 5, 1)
    other = service_client.post(RESERVATIONS, reserve_body(merchant, "o-1", (lamp, 3)), format="json")
    assert other.status_code == 409 and other.json()["code"] == "RESERVATION_MISMATCH"
    listed = service_client.get(RESERVATIONS, {"orderId": "o-1"}).json()
    assert len(listed) == 2


def test_release_and_commit(service_client):
    merchant = new_id()
    lamp = new_item(merchant, on_hand=5)
    service_client.post(RESERVATIONS, reserve_body(merchant, "o-2", (lamp, 2)), format="json")
    service_client.post(RESERVATIONS, reserve_body(merchant, "o-3", (lamp, 3)), format="json")
    released = service_client.post(f"{RESERVATIONS}/release", {"orderId": "o-2"}, format="json")
    assert released.status_code == 200 and released.json()[0]["status"] == "RELEASED"
    assert service_client.post(f"{RESERVATIONS}/release", {"orderId": "o-2"}, format="json").status_code == 200  # idempotent
    committed = service_client.post(f"{RESERVATIONS}/commit", {"orderId": "o-3"}, format="json")
    assert committed.status_code == 200, committed.content
    assert [(t["operation"], t["delta"], t["reservedDelta"], t["note"]) for t in committed.json()] == [
        ("DEDUCT", -3, -3, Note.RESERVATION_CONVERTED)
    ]
    assert service_client.post(f"{RESERVATIONS}/commit", {"orderId": "o-3"}, format="json").json() == []  # once
    stock = stock_of(lamp)
    assert (stock.quantity_on_hand, stock.reserved) == (2, 0)
    assert Reservation.objects.get(order_id="o-3").status == "COMMITTED"


def test_lines_may_name_commerces_variant(service_client):
    merchant = new_id()
    item = new_item(merchant, on_hand=5)
    body = {
        "orderId": "SO-variant",
        "merchantId": str(merchant),
        "lines": [{"lineId": "1", "variantId": str(item.variant_id), "quantity": 2}],
    }
    made = service_client.post(RESERVATIONS, body, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()[0]["inventoryItemId"] == str(item.id) and stock_of(item).reserved == 2
    unknown = {**body, "orderId": "SO-unknown", "lines": [{"lineId": "1", "variantId": str(new_id()), "quantity": 1}]}
    missing = service_client.post(RESERVATIONS, unknown, format="json")
    assert missing.status_code == 404 and missing.json()["variantIds"] == [unknown["lines"][0]["variantId"]]
    both = {
        **body,
        "orderId": "SO-both",
        "lines": [{"lineId": "1", "variantId": str(item.variant_id), "inventoryItemId": str(item.id), "quantity": 1}],
    }
    assert service_client.post(RESERVATIONS, both, format="json").status_code == 400


def test_internal_routes_need_the_service_credentials():
    admin = make_caller(roles=["ADMIN"]).client()
    assert admin.post(RESERVATIONS, {}, format="json").status_code in (401, 403)
    from rest_framework.test import APIClient

    assert APIClient().get(RESERVATIONS, {"orderId": "x"}).status_code == 401


@pytest.mark.parametrize(
    "patch",
    [
        {"lines": []},
        {"lines": [{"lineId": "1", "inventoryItemId": "1", "quantity": 0}]},
        {"lines": [{"lineId": "1", "inventoryItemId": "1", "quantity": -2}]},
        {"orderId": "bad id with spaces"},
        {"merchantId": "abc"},
    ],
)
def test_bad_reservations_are_400(service_client, patch):
    merchant = new_id()
    item = new_item(merchant, on_hand=1)
    response = service_client.post(RESERVATIONS, {**reserve_body(merchant, "o-4", (item, 1)), **patch}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"


def test_unknown_or_foreign_item_is_404(service_client):
    merchant = new_id()
    theirs = new_item(new_id(), on_hand=3)
    response = service_client.post(RESERVATIONS, reserve_body(merchant, "o-5", (theirs, 1)), format="json")
    assert response.status_code == 404


def test_expired_reservations_are_released_by_the_beat_task(service_client):
    merchant = new_id()
    lamp = new_item(merchant, on_hand=4)
    body = {**reserve_body(merchant, "o-6", (lamp, 3)), "ttlSeconds": 60}
    assert service_client.post(RESERVATIONS, body, format="json").status_code == 201
    services.reservation_reserve(order_id="o-7", merchant_id=merchant, lines=[{"line_id": "1", "item_id": lamp.id, "quantity": 1}])
    Reservation.objects.filter(order_id="o-6").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_reservations.apply().get() == 1
    assert expire_reservations.apply().get() == 0
    assert Reservation.objects.get(order_id="o-6").status == "EXPIRED"
    assert Reservation.objects.get(order_id="o-7").status == "ACTIVE"
    assert stock_of(lamp).reserved == 1
    release = Tracking.objects.get(reference_id="o-6", operation="RELEASE")
    assert (release.reserved_delta, release.note) == (-3, Note.RESERVATION_EXPIRED)
    expired = service_client.post(f"{RESERVATIONS}/commit", {"orderId": "o-6"}, format="json")
    assert expired.status_code == 409 and expired.json()["code"] == "RESERVATION_EXPIRED"


def test_a_deduction_naming_another_merchants_location_is_refused():
    """Before the fix a paid line's locationId was used without checking its merchant."""
    merchant = new_id()
    lamp = new_item(merchant, on_hand=3)
    theirs = services.location_create(merchant_id=new_id(), name="Theirs")
    line = {"line_id": "1", "variant_id": lamp.variant_id, "quantity": 1, "location_id": theirs.id}
    with pytest.raises(NotFound):
        services.stock_deduct_order(order_id="o-8", merchant_id=merchant, lines=[line])
    assert not Tracking.objects.filter(reference_id="o-8").exists()


def test_a_batch_of_orders_is_deducted_in_order_once_each():
    """The payment.success batch handler's path: orders share items, one repeats, the last runs dry."""
    merchant = new_id()
    lamp, desk = new_item(merchant, on_hand=5), new_item(merchant, on_hand=10)

    def order(order_id, *lines):
        return {
            "order_id": order_id,
            "merchant_id": merchant,
            "lines": [{"line_id": str(n), "variant_id": i.variant_id, "quantity": q} for n, (i, q) in enumerate(lines, 1)],
        }

    orders = [
        order("b-1", (lamp, 2), (desk, 1)),
        order("b-2", (lamp, 2)),
        order("b-1", (lamp, 2), (desk, 1)),
        order("b-3", (lamp, 2), (desk, 3)),
    ]
    rows = services.stock_deduct_orders(orders=orders)
    assert [(t.reference_id, t.reference_line, t.delta, t.note) for t in rows] == [
        ("b-1", "1", -2, ""),
        ("b-1", "2", -1, ""),
        ("b-2", "1", -2, ""),
        ("b-3", "1", 0, Note.OVERSELL_BLOCKED),
        ("b-3", "2", -3, ""),
    ]
    assert (stock_of(lamp).quantity_on_hand, stock_of(desk).quantity_on_hand) == (1, 6)
    assert services.stock_deduct_orders(orders=orders) == []
