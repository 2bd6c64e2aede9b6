"""The per-merchant footer summary (spec 1.3): aggregates cached in the real Redis and retired by the
writes that change them."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.commerce import services
from apps.commerce.models import SaleOrder
from apps.commerce.sales import services as sales
from tests.commerce.conftest import new_merchant, new_product, new_variant
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")


def test_summary_counts_by_status_is_cached_and_follows_writes(seeded, django_capture_on_commit_callbacks):
    merchant = new_merchant()
    url = f"/v1/api/commerce/merchants/{merchant.id}/summary"
    client = make_caller(roles=[("EMPLOYEE", merchant.id)]).client()
    with django_capture_on_commit_callbacks(using="commerce", execute=True):
        lamp = new_product(merchant.id, status="PUBLISHED")
        new_product(merchant.id)
        new_variant(lamp.id)
        services.integration_create(merchant_id=merchant.id, code="VNPAY", credential="secret-credential")
    first = client.get(url)
    assert first.status_code == 200 and first["X-Summary-Cache"] == "miss"
    assert first.json() == {
        "merchantId": str(merchant.id),
        "products": {"DRAFT": 1, "PUBLISHED": 1, "ARCHIVED": 0},
        "variants": {"ACTIVE": 1, "INACTIVE": 0},
        "media": {"count": 0, "bytes": 0},
        "integrations": {"ACTIVE": 1, "INACTIVE": 0},
        "orders": {
            "DRAFT": 0,
            "PLACED": 0,
            "PAID": 0,
            "FULFILLED": 0,
            "CANCELLED": 0,
            "EXPIRED": 0,
            "PARTIALLY_REFUNDED": 0,
            "REFUNDED": 0,
        },
        "revenueThisMonth": {},
    }
    assert client.get(url)["X-Summary-Cache"] == "hit"
    with django_capture_on_commit_callbacks(using="commerce", execute=True):  # the write's commit
        services.product_update(product_id=lamp.id, status="ARCHIVED")
    after = client.get(url)
    assert after["X-Summary-Cache"] == "miss" and after.json()["products"] == {"DRAFT": 1, "PUBLISHED": 0, "ARCHIVED": 1}
    with django_capture_on_commit_callbacks(using="commerce", execute=True):  # an order: counted, its revenue once paid
        order = sales.order_create(merchant_id=merchant.id, lines=[{"variant_id": lamp.variants.get().id, "quantity": 2}])
    assert client.get(url).json()["orders"]["DRAFT"] == 1
    SaleOrder.objects.filter(pk=order.id).update(status="PAID", paid_at=timezone.now(), gross_amount=3000)
    services.summary_retire(merchant.id)
    assert client.get(url).json()["revenueThisMonth"] == {"EUR": 3000}
    assert make_caller(roles=[("EMPLOYEE", new_merchant().id)]).client().get(url).status_code == 404
