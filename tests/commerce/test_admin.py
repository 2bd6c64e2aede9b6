"""The Django admin of commerce: read-only records, changes and deletes through the services."""

from __future__ import annotations

import pytest

from apps.commerce.models import Merchant, Product, ProductVariant
from tests.commerce.conftest import new_merchant, new_product, new_variant

pytestmark = pytest.mark.django_db(databases="__all__")


def test_records_are_shown_read_only_and_actions_go_through_the_services(admin_client):
    merchant = new_merchant()
    product = new_product(merchant.id)
    variant = new_variant(product.id)
    for model, record in (("merchant", merchant), ("product", product), ("productvariant", variant)):
        assert admin_client.get(f"/admin/commerce/{model}/").status_code == 200
        assert admin_client.get(f"/admin/commerce/{model}/{record.id}/change/").status_code == 200
        assert admin_client.get(f"/admin/commerce/{model}/add/").status_code == 403
    admin_client.post("/admin/commerce/merchant/", {"action": "suspend", "_selected_action": [merchant.id]})
    assert Merchant.objects.get(pk=merchant.id).status == "SUSPENDED"
    admin_client.post("/admin/commerce/product/", {"action": "delete_selected", "_selected_action": [product.id], "post": "yes"})
    assert Product.all_objects.get(pk=product.id).is_deleted and ProductVariant.all_objects.get(pk=variant.id).is_deleted
    busy = new_merchant()
    new_product(busy.id)
    refused = admin_client.post("/admin/commerce/merchant/", {"action": "delete_selected", "_selected_action": [busy.id], "post": "yes"})
    assert refused.status_code == 302 and Merchant.objects.filter(pk=busy.id).exists()  # refused with a message, not a 500
    assert "MERCHANT_NOT_EMPTY" in admin_client.get("/admin/commerce/merchant/").content.decode()
    admin_client.post("/admin/commerce/merchant/", {"action": "delete_selected", "_selected_action": [merchant.id], "post": "yes"})
    assert not Merchant.objects.filter(pk=merchant.id).exists()


def test_sale_orders_are_read_only_with_their_lines_and_actions_call_the_services(admin_client):
    from apps.commerce.models import SaleOrder
    from apps.commerce.sales import services as sales

    merchant = new_merchant()
    variant = new_variant(new_product(merchant.id).id, sku="ADMIN-LAMP")
    draft = sales.order_create(merchant_id=merchant.id, lines=[{"variant_id": variant.id, "quantity": 2}])
    paid_too_early = sales.order_create(merchant_id=merchant.id, lines=[{"variant_id": variant.id, "quantity": 1}])
    assert admin_client.get("/admin/commerce/saleorder/").status_code == 200
    page = admin_client.get(f"/admin/commerce/saleorder/{draft.id}/change/")
    assert page.status_code == 200 and "ADMIN-LAMP" in page.content.decode()
    assert admin_client.get("/admin/commerce/saleorder/add/").status_code == 403
    admin_client.post("/admin/commerce/saleorder/", {"action": "cancel", "_selected_action": [draft.id]})
    assert SaleOrder.objects.get(pk=draft.id).status == "CANCELLED"
    refused = admin_client.post("/admin/commerce/saleorder/", {"action": "fulfill", "_selected_action": [paid_too_early.id]})
    assert refused.status_code == 302 and SaleOrder.objects.get(pk=paid_too_early.id).status == "DRAFT"
    assert "ILLEGAL_TRANSITION" in admin_client.get("/admin/commerce/saleorder/").content.decode()


def test_unmatched_settlements_are_shown_to_operators_read_only(admin_client):
    from apps.commerce.models import UnmatchedSettlement
    from apps.commerce.sales import services as sales

    merchant = new_merchant()
    payload = {
        "event": "transaction.settled",
        "transaction": {"id": "77", "merchantId": str(merchant.id), "sourceId": "ref-1", "amount": 1},
    }
    assert sales.webhook_apply(merchant_id=merchant.id, message_id="msg_admin", payload=payload) == "unmatched"
    listing = admin_client.get("/admin/commerce/unmatchedsettlement/")
    assert listing.status_code == 200 and "UNKNOWN_TRANSACTION" in listing.content.decode()
    assert admin_client.get("/admin/commerce/unmatchedsettlement/msg_admin/change/").status_code == 200
    assert admin_client.get("/admin/commerce/unmatchedsettlement/add/").status_code == 403
    assert UnmatchedSettlement.objects.get(pk="msg_admin").source_id == "ref-1"
