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


def test_a_seller_made_a_plain_member_elsewhere_reaches_only_the_integrations_it_created_there(seeded):
    """Added to merchant B through identity's policy API (no role there, not its creator), a seller
    does not reach B's integration created by someone else; the one it created stays its own."""
    merchant = new_merchant(created_by=make_caller(roles=["OWNER"]).user_id)
    seller = make_caller(roles=["OWNER"])
    body = {"kind": "JOIN_DOMAIN", "subjectId": str(seller.user_id), "domain": str(merchant.id)}
    assert make_caller(roles=["ADMIN"]).client().post("/v1/api/identity/policies", body, format="json").status_code == 201
    theirs = services.integration_create(merchant_id=merchant.id, code="VNPAY", credential="sk_live_owner_rule_0003")
    own = services.integration_create(merchant_id=merchant.id, code="MOMO", credential="sk_live_owner_rule_0004", created_by=seller.user_id)
    client = seller.client()
    assert client.get(f"{URL}/{theirs.id}").status_code == 404
    assert client.patch(f"{URL}/{theirs.id}", {"status": "INACTIVE"}, format="json").status_code == 404
    assert client.delete(f"{URL}/{theirs.id}").status_code == 404
    assert [row["id"] for row in client.get(URL).json()["results"]] == [str(own.id)]
    assert client.get(f"{URL}/{own.id}").status_code == 200
    assert client.patch(f"{URL}/{own.id}", {"status": "INACTIVE"}, format="json").status_code == 200
