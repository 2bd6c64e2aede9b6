"""The OWNER rule (spec 5) on outreach: a seller (OWNER held everywhere) made CASHIER of another
merchant does not read, mark or delete that merchant's inquiries (its cashiers do not)."""

from __future__ import annotations

import pytest

from apps.outreach import services
from apps.outreach.seeds import run as seed
from tests.outreach.conftest import INQUIRIES
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
MERCHANT = 303


def make_inquiry(merchant_id: int):
    return services.inquiry_submit(name="Ada", email="ada@example.com", subject="Prices", message="Hello", merchant_id=merchant_id)


def test_a_seller_made_cashier_elsewhere_does_not_reach_that_merchants_inquiries():
    seed()
    inquiry = make_inquiry(MERCHANT)
    seller = make_caller(roles=["OWNER", ("CASHIER", MERCHANT)]).client()
    assert seller.get(INQUIRIES).json()["results"] == []
    assert seller.get(f"{INQUIRIES}/{inquiry.id}").status_code == 404
    assert seller.patch(f"{INQUIRIES}/{inquiry.id}", {"status": "CANCELLED"}, format="json").status_code == 404
    assert seller.delete(f"{INQUIRIES}/{inquiry.id}").status_code == 404


def test_a_seller_handles_the_inquiries_of_the_merchant_it_joined():
    seed()
    inquiry = make_inquiry(MERCHANT + 1)
    seller = make_caller(roles=["OWNER"], merchants=[MERCHANT + 1]).client()
    assert seller.patch(f"{INQUIRIES}/{inquiry.id}", {"status": "CANCELLED"}, format="json").status_code == 200


def test_a_seller_made_a_plain_member_elsewhere_does_not_handle_that_merchants_inquiries():
    seed()
    inquiry = make_inquiry(MERCHANT + 2)
    seller = make_caller(roles=["OWNER"], joined=[MERCHANT + 2]).client()
    assert seller.patch(f"{INQUIRIES}/{inquiry.id}", {"status": "CANCELLED"}, format="json").status_code == 404
