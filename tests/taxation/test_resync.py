"""`manage.py resync_tax` (issue 17, feature 4): a deliberate backfill from commerce's API, which
it reads over HTTP with the service credentials (a live server of this process)."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.commerce import services as commerce
from apps.taxation import services
from apps.taxation.models import Product, TaxSet

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def statuses(product_id: int) -> list[str]:
    return list(TaxSet.objects.filter(product_id=product_id).order_by("id").values_list("status", flat=True))


def test_resync_provisions_what_commerce_lists_and_optionally_deprovisions_the_rest(live_server):
    merchant = commerce.merchant_create(name="Shop", slug="shop-resync", default_currency="EUR", country="FR")
    group = services.tax_group_create(merchant_id=merchant.id, name="g", items=[{"name": "VAT", "rate": Decimal(20)}])
    taxed = commerce.product_create(merchant_id=merchant.id, name="Lamp", tax_group_id=group.id)
    untaxed = commerce.product_create(merchant_id=merchant.id, name="Gift card")
    deleted = commerce.product_create(merchant_id=merchant.id, name="Old", tax_group_id=group.id)
    services.tax_set_provision(product_id=untaxed.id, tax_group_id=group.id)  # stale: commerce has no group
    services.tax_set_provision(product_id=deleted.id, tax_group_id=group.id)
    commerce.product_delete(product_id=deleted.id)
    url = f"{live_server.url}/v1/api/commerce"

    out = StringIO()
    call_command("resync_tax", commerce_url=url, merchant=merchant.id, stdout=out)
    assert statuses(taxed.id) == ["ACTIVE"]
    assert statuses(untaxed.id) == ["DEACTIVATED"]
    assert statuses(deleted.id) == ["ACTIVE"]  # not listed, left alone without --deprovision-missing
    assert "products=2 provisioned=1" in out.getvalue()

    call_command("resync_tax", commerce_url=url, merchant=merchant.id, deprovision_missing=True, stdout=StringIO())
    assert statuses(taxed.id) == ["ACTIVE"]  # idempotent: ALREADY_PROVISIONED
    assert statuses(deleted.id) == ["DEACTIVATED"]
    assert set(TaxSet.objects.filter(product_id=taxed.id).values_list("source", flat=True)) == {"resync"}


def test_a_product_naming_a_missing_group_is_reported_and_the_others_still_run(live_server):
    merchant = commerce.merchant_create(name="Shop", slug="shop-resync-2", default_currency="EUR", country="FR")
    group = services.tax_group_create(merchant_id=merchant.id, name="g", items=[{"name": "VAT", "rate": Decimal(20)}])
    broken = commerce.product_create(merchant_id=merchant.id, name="Broken", tax_group_id=987654321)
    fine = commerce.product_create(merchant_id=merchant.id, name="Fine", tax_group_id=group.id)
    err = StringIO()
    with pytest.raises(CommandError, match="1 product"):
        call_command("resync_tax", commerce_url=f"{live_server.url}/v1/api/commerce", stdout=StringIO(), stderr=err)
    assert f"{broken.id}: No tax group has this id." in err.getvalue()
    assert statuses(fine.id) == ["ACTIVE"] and statuses(broken.id) == []


def test_a_product_taxation_recorded_under_another_merchant_is_reported_and_left_alone(live_server):
    merchant = commerce.merchant_create(name="Shop", slug="shop-resync-3", default_currency="EUR", country="FR")
    group = services.tax_group_create(merchant_id=merchant.id, name="g", items=[{"name": "VAT", "rate": Decimal(20)}])
    lamp = commerce.product_create(merchant_id=merchant.id, name="Lamp", tax_group_id=group.id)
    other_merchant = merchant.id + 1
    services.product_apply(product_id=lamp.id, merchant_id=other_merchant, tax_group_id=None)  # recorded under another merchant
    err = StringIO()
    with pytest.raises(CommandError, match="1 product"):
        call_command("resync_tax", commerce_url=f"{live_server.url}/v1/api/commerce", merchant=merchant.id, stdout=StringIO(), stderr=err)
    assert f"{lamp.id}: product {lamp.id} is a product of merchant {other_merchant}, not of merchant {merchant.id}." in err.getvalue()
    assert statuses(lamp.id) == [] and Product.objects.get(product_id=lamp.id).merchant_id == other_merchant


def test_commerce_refusing_is_a_clear_failure(live_server, settings):
    settings.SERVICE_BASIC_AUTH_CREDENTIALS = {**settings.SERVICE_BASIC_AUTH_CREDENTIALS, "taxation": "wrong"}
    with pytest.raises(CommandError, match="commerce answered 401"):
        call_command("resync_tax", commerce_url=f"{live_server.url}/v1/api/commerce", stdout=StringIO())
