"""The OWNER rule (spec 5) on commerce: a seller (OWNER held everywhere) made CASHIER of another
merchant reaches that merchant's records as a CASHIER, plus the ones it created itself."""

from __future__ import annotations

import pytest

from apps.commerce import services
from tests.commerce.conftest import new_merchant
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
URL = "/v1/api/commerce/integrations"


def test_a_seller_made_cashier_elsewhere_does_not_touch_that_merchants_integration(seeded):
    merchant = new_merchant()
    integration = services.integration_create(merchant_id=merchant.id, code="VNPAY", credential="sk_live_owner_rule_0001")
    seller = make_caller(roles=["OWNER", ("CASHIER", merchant.id)]).client()
    assert seller.get(f"{URL}/{integration.id}").status_code == 404  # B's cashiers do not read credentials' records
    assert seller.patch(f"{URL}/{integration.id}", {"status": "INACTIVE"}, format="json").status_code == 404
    assert seller.delete(f"{URL}/{integration.id}").status_code == 404
    assert seller.get(URL).json()["results"] == []


def test_a_seller_keeps_its_own_merchants_integrations(seeded):
    seller = make_caller(roles=["OWNER"])
    merchant = new_merchant(created_by=seller.user_id)
    integration = services.integration_create(merchant_id=merchant.id, code="VNPAY", credential="sk_live_owner_rule_0002")
    client = seller.client()
    assert client.patch(f"{URL}/{integration.id}", {"status": "INACTIVE"}, format="json").status_code == 200
    assert client.delete(f"{URL}/{integration.id}").status_code == 204
