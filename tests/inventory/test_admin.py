"""The Django admin (all-in-one topology): every inventory record is shown read-only; quantities
and tracking cannot be edited or deleted; changes are actions that call the service functions."""

from __future__ import annotations

import pytest

from apps.inventory import services
from apps.inventory.models import Item, Ticket, Tracking
from tests.inventory.conftest import new_id, new_item, stock_of

pytestmark = pytest.mark.django_db(databases="__all__")


def test_records_are_shown_read_only(admin_client):
    merchant = new_id()
    item = new_item(merchant, on_hand=4)
    stock, row = stock_of(item), Tracking.objects.filter(item_id=item.id).latest("id")
    order = services.purchase_order_create(
        merchant_id=merchant, supplier="S", currency="EUR", lines=[{"item_id": item.id, "quantity": 1, "unit_cost_amount": 5}]
    )
    ticket = services.ticket_create(item_id=item.id)
    for model, pk in (
        ("location", stock.location_id),
        ("item", item.id),
        ("stock", stock.id),
        ("tracking", row.id),
        ("ticket", ticket.id),
        ("purchaseorder", order.id),
    ):
        page = admin_client.get(f"/admin/inventory/{model}/{pk}/change/")
        assert page.status_code == 200, model
        assert b'name="quantity_on_hand"' not in page.content and b'name="delta"' not in page.content
        assert admin_client.get(f"/admin/inventory/{model}/").status_code == 200, model
        assert admin_client.get(f"/admin/inventory/{model}/add/").status_code == 403, model
    assert admin_client.post(f"/admin/inventory/stock/{stock.id}/change/", {"quantity_on_hand": 99}).status_code == 403
    assert admin_client.get(f"/admin/inventory/tracking/{row.id}/delete/").status_code == 403
    assert b"4" in admin_client.get(f"/admin/inventory/stock/{stock.id}/change/").content


def test_actions_go_through_the_services(admin_client):
    merchant = new_id()
    item = new_item(merchant, on_hand=2)
    response = admin_client.post("/admin/inventory/item/", {"action": "allow_oversell", "_selected_action": [item.id]})
    assert response.status_code == 302 and Item.objects.get(pk=item.id).allow_oversell is True
    ticket = services.ticket_create(item_id=item.id)
    refused = admin_client.post("/admin/inventory/ticket/", {"action": "apply_counts", "_selected_action": [ticket.id]}, follow=True)
    assert b"Not changed" in refused.content  # not counted yet: the state machine refuses
    services.ticket_count(ticket_id=ticket.id, counted_quantity=5)
    admin_client.post("/admin/inventory/ticket/", {"action": "apply_counts", "_selected_action": [ticket.id]})
    assert Ticket.objects.get(pk=ticket.id).status == "APPLIED" and stock_of(item).quantity_on_hand == 5
