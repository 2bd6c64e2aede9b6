"""The OWNER rule (spec 5) on finance: a seller (OWNER held everywhere) made CASHIER of another
merchant reads that merchant's books as its cashiers do, and changes nothing there."""

from __future__ import annotations

import pytest

from tests.finance.conftest import books, new_merchant_id
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
API = "/v1/api/finance"


def test_a_seller_made_cashier_elsewhere_only_reads_that_merchants_accounts(seeded):
    chart = books()
    cash = chart["CASH"]
    seller = make_caller(roles=["OWNER", ("CASHIER", cash.merchant_id)]).client()
    assert seller.get(f"{API}/accounts/{cash.id}").status_code == 200  # CASHIER reads the books
    assert seller.patch(f"{API}/accounts/{cash.id}", {"name": "mine now"}, format="json").status_code == 403
    body = {"merchantId": str(cash.merchant_id), "code": "1020", "name": "Till 2", "type": "ASSET", "currency": "EUR"}
    assert seller.post(f"{API}/accounts", body, format="json").status_code == 403


def test_a_seller_keeps_the_books_of_the_merchant_it_joined(seeded):
    merchant_id = new_merchant_id()
    cash = books(merchant_id)["CASH"]
    seller = make_caller(roles=["OWNER"], merchants=[merchant_id]).client()
    assert seller.patch(f"{API}/accounts/{cash.id}", {"name": "Main till"}, format="json").status_code == 200


def test_a_seller_made_a_plain_member_elsewhere_does_not_touch_that_merchants_books(seeded):
    merchant_id = new_merchant_id()
    cash = books(merchant_id)["CASH"]
    seller = make_caller(roles=["OWNER"], joined=[merchant_id]).client()
    assert seller.get(f"{API}/accounts/{cash.id}").status_code == 404
    assert seller.patch(f"{API}/accounts/{cash.id}", {"name": "Main till"}, format="json").status_code == 404
