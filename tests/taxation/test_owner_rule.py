"""The OWNER rule (spec 5) on taxation: a seller (OWNER held everywhere) made CASHIER of another
merchant asks that merchant for quotes as its cashiers do, and neither reads nor changes its tax
groups."""

from __future__ import annotations

import pytest

from tests.taxation.conftest import BASE, item

pytestmark = pytest.mark.django_db(databases="__all__")
MERCHANT = 9_401


def test_a_seller_made_cashier_elsewhere_does_not_reach_that_merchants_tax_groups(make_caller, make_group):
    group = make_group(item("VAT", "10"), merchant_id=MERCHANT)
    seller = make_caller(roles=["OWNER", ("CASHIER", MERCHANT)]).client()
    assert seller.get(f"{BASE}/tax-groups").json()["results"] == []
    assert seller.get(f"{BASE}/tax-groups/{group.id}").status_code == 404
    assert seller.patch(f"{BASE}/tax-groups/{group.id}", {"name": "mine"}, format="json").status_code == 404
    assert seller.delete(f"{BASE}/tax-groups/{group.id}").status_code == 404


def test_a_seller_keeps_the_tax_groups_of_the_merchant_it_joined(make_caller, make_group):
    group = make_group(item("VAT", "10"), merchant_id=MERCHANT + 1)
    seller = make_caller(roles=["OWNER"], merchants=[MERCHANT + 1]).client()
    assert seller.delete(f"{BASE}/tax-groups/{group.id}").status_code == 204


def test_a_seller_made_a_plain_member_elsewhere_does_not_reach_that_merchants_tax_groups(make_caller, make_group):
    group = make_group(item("VAT", "10"), merchant_id=MERCHANT + 2)
    seller = make_caller(roles=["OWNER"], joined=[MERCHANT + 2]).client()
    assert seller.delete(f"{BASE}/tax-groups/{group.id}").status_code == 404
