"""The OWNER rule (spec 5) on signal's /stream: a seller (OWNER held everywhere) made CASHIER of
another merchant does not join that merchant's payment or ledger rooms (its cashiers do not); in
the merchant it joined as creator it does."""

from __future__ import annotations

import pytest

from tests.signal.test_rooms import joins, seeds
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def test_a_seller_made_cashier_elsewhere_does_not_join_that_merchants_event_rooms(stream_url):
    seeds()
    seller = make_caller(roles=["OWNER", ("CASHIER", 631)])
    assert not joins(stream_url, seller, "merchant.631.payment")
    assert not joins(stream_url, seller, "merchant.631.ledger")


def test_a_seller_joins_the_event_rooms_of_the_merchant_it_joined(stream_url):
    seeds()
    seller = make_caller(roles=["OWNER"], merchants=[632])
    assert joins(stream_url, seller, "merchant.632.payment")
    assert joins(stream_url, seller, "merchant.632.ledger")


def test_a_seller_made_a_plain_member_elsewhere_does_not_join_that_merchants_event_rooms(stream_url):
    seeds()
    seller = make_caller(roles=["OWNER"], joined=[633])
    assert not joins(stream_url, seller, "merchant.633.payment")
    assert not joins(stream_url, seller, "merchant.633.ledger")
