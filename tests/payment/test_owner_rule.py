"""The OWNER rule (spec 5) on payment: a seller (OWNER held everywhere) made CASHIER of another
merchant opens and reads that merchant's transactions as its cashiers do, and does not reach its
webhooks (a CASHIER does not); the webhooks it created itself stay its own."""

from __future__ import annotations

import pytest

from tests.payment.conftest import BASE, new_merchant_id
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture(autouse=True)
def private_urls(settings):
    settings.PAYMENT_WEBHOOK_ALLOW_PRIVATE_URLS = True  # the subscriber URLs below are on loopback


def subscribe(client, merchant: int) -> dict:
    body = {"merchantId": str(merchant), "name": "sale", "url": "http://127.0.0.1:9/hook", "eventTypes": ["transaction.created"]}
    response = client.post(f"{BASE}/webhooks", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_seller_made_cashier_elsewhere_does_not_reach_that_merchants_webhooks(seeded):
    merchant = new_merchant_id()
    config = subscribe(make_caller(roles=[("ADMIN", merchant)]).client(), merchant)
    seller = make_caller(roles=["OWNER", ("CASHIER", merchant)]).client()
    assert seller.get(f"{BASE}/webhooks/{config['id']}").status_code == 404
    assert seller.patch(f"{BASE}/webhooks/{config['id']}", {"name": "mine"}, format="json").status_code == 404
    assert seller.delete(f"{BASE}/webhooks/{config['id']}").status_code == 404
    assert seller.get(f"{BASE}/webhooks").json()["results"] == []
    body = {"merchantId": str(merchant), "name": "x", "url": "http://127.0.0.1:9/x", "eventTypes": ["transaction.created"]}
    assert seller.post(f"{BASE}/webhooks", body, format="json").status_code == 403


def test_a_seller_keeps_the_webhooks_of_the_merchant_it_joined(seeded):
    merchant = new_merchant_id()
    seller = make_caller(roles=["OWNER"], merchants=[merchant]).client()
    config = subscribe(seller, merchant)
    assert seller.delete(f"{BASE}/webhooks/{config['id']}").status_code == 204


def test_a_seller_made_a_plain_member_elsewhere_does_not_reach_that_merchants_webhooks(seeded):
    merchant = new_merchant_id()
    config = subscribe(make_caller(roles=[("ADMIN", merchant)]).client(), merchant)
    seller = make_caller(roles=["OWNER"], joined=[merchant]).client()
    assert seller.get(f"{BASE}/webhooks/{config['id']}").status_code == 404
    assert seller.delete(f"{BASE}/webhooks/{config['id']}").status_code == 404
