"""The OWNER rule (spec 5) on inventory: a seller (OWNER held everywhere) made CASHIER of another
merchant reads that merchant's locations as its cashiers do, and changes only the ones it created."""

from __future__ import annotations

import pytest

from tests.inventory.conftest import new_id
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
BASE = "/v1/api/inventory"


def test_a_seller_made_cashier_elsewhere_does_not_change_that_merchants_locations(seeded):
    merchant = new_id()
    admin = make_caller(roles=[("ADMIN", merchant)]).client()
    created = admin.post(f"{BASE}/locations", {"merchantId": str(merchant), "name": "Back room", "code": "BR"}, format="json")
    assert created.status_code == 201, created.content
    location = created.json()["id"]
    seller = make_caller(roles=["OWNER", ("CASHIER", merchant)]).client()
    assert seller.get(f"{BASE}/locations/{location}").status_code == 200  # CASHIER reads locations
    assert seller.patch(f"{BASE}/locations/{location}", {"name": "x"}, format="json").status_code == 403
    assert seller.delete(f"{BASE}/locations/{location}").status_code == 403
    body = {"merchantId": str(merchant), "name": "Shed", "code": "SH"}
    assert seller.post(f"{BASE}/locations", body, format="json").status_code == 403


def test_a_seller_keeps_the_locations_of_the_merchant_it_joined(seeded):
    merchant = new_id()
    seller = make_caller(roles=["OWNER"], merchants=[merchant]).client()
    created = seller.post(f"{BASE}/locations", {"merchantId": str(merchant), "name": "Back room", "code": "BR"}, format="json")
    assert created.status_code == 201, created.content
    assert seller.delete(f"{BASE}/locations/{created.json()['id']}").status_code == 204


def test_a_seller_made_a_plain_member_elsewhere_does_not_add_locations_there(seeded):
    merchant = new_id()
    seller = make_caller(roles=["OWNER"], joined=[merchant]).client()
    created = seller.post(f"{BASE}/locations", {"merchantId": str(merchant), "name": "Back room", "code": "BR"}, format="json")
    assert created.status_code == 403, created.content
