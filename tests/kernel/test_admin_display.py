"""Issue 32 item 8, "Operators read money, not minor units" (merchant_platform.admin): amounts in major
units with their currency, merchant ids with the merchant's name (one request to commerce per list
page, kept in Redis; the bare id when commerce does not answer), and a list filter by merchant."""

from __future__ import annotations

import secrets
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.cache import cache

from apps.commerce.models import Merchant
from apps.payment.models import PaymentAttempt, PaymentTransaction
from merchant_platform.admin import COMMERCE_DOWN_KEY, MERCHANT_NAME_KEY, MERCHANT_PAGE_SIZE
from merchant_platform.filters import MAX_ID
from merchant_platform.money import display
from merchant_platform.verification.service_accounts import basic_auth_header
from tests.support.http import JsonHandler, local_server
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db(databases="__all__")


class Commerce(JsonHandler):
    """Commerce's merchant list, as its service accounts read it."""

    merchants: list[dict] = []
    requests: list[tuple[str, dict, str]] = []

    def answer(self, path):
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        type(self).requests.append((parts.path, query, self.headers.get("Authorization", "")))
        asked = set(query.get("ids", [""])[0].split(","))
        named = [merchant for merchant in self.merchants if merchant["id"] in asked]
        return (200 if parts.path == "/merchants" else 404), {"count": len(named), "results": named}


@pytest.fixture
def merchants():
    """Two merchants commerce names, their transactions, and no name of theirs in Redis yet."""
    acme, globex = (7_450_000_000_000_000 + secrets.randbelow(10**12) for _ in range(2))
    Commerce.merchants = [{"id": str(acme), "name": "Acme Shop"}, {"id": str(globex), "name": "Globex"}]
    Commerce.requests = []
    cache.delete_many([COMMERCE_DOWN_KEY, *(MERCHANT_NAME_KEY.format(merchant_id) for merchant_id in (acme, globex))])
    PaymentTransaction.objects.create(merchant_id=acme, source_id=f"acme-{acme}", amount=1100, currency="EUR")
    PaymentTransaction.objects.create(merchant_id=globex, source_id=f"globex-{globex}", amount=1100, currency="KWD")
    yield acme, globex
    cache.delete_many([COMMERCE_DOWN_KEY, *(MERCHANT_NAME_KEY.format(merchant_id) for merchant_id in (acme, globex))])


@pytest.fixture
def commerce(settings):
    with local_server(Commerce) as url:
        settings.ADMIN_COMMERCE_URL = url
        yield


@pytest.mark.parametrize(
    ("amount", "currency", "shown"),
    [(1100, "EUR", "11.00 EUR"), (1100, "JPY", "1100 JPY"), (1100, "KWD", "1.100 KWD"), (-5, "BHD", "-0.005 BHD"), (0, "USD", "0.00 USD")],
)
def test_an_amount_shows_in_major_units_with_the_currency_exponent(amount, currency, shown):
    assert display(amount, currency) == shown


def test_the_transaction_list_shows_money_and_merchant_names_from_one_request(admin_client, commerce, merchants):
    acme, globex = merchants
    page = admin_client.get("/admin/payment/paymenttransaction/").content.decode()
    assert "11.00 EUR" in page and "1.100 KWD" in page
    assert f"Acme Shop ({acme})" in page and f"Globex ({globex})" in page
    assert len(Commerce.requests) == 1  # the filter's choices and the rows share it
    path, query, authorization = Commerce.requests[0]
    assert path == "/merchants" and sorted(query["ids"][0].split(",")) == sorted([str(acme), str(globex)])
    assert authorization.startswith("Basic ")  # payment's own service account
    admin_client.get("/admin/payment/paymenttransaction/")
    assert len(Commerce.requests) == 1  # the names come from Redis now


def test_a_merchant_commerce_does_not_list_shows_its_id_without_a_request_per_page(admin_client, commerce, merchants):
    acme, globex = merchants
    Commerce.merchants = [merchant for merchant in Commerce.merchants if merchant["id"] != str(globex)]
    for _ in range(2):
        page = admin_client.get("/admin/payment/paymenttransaction/").content.decode()
        assert f"Acme Shop ({acme})" in page and str(globex) in page
    assert len(Commerce.requests) == 1


def test_the_merchant_filter_lists_the_merchants_by_name_and_filters(admin_client, commerce, merchants):
    acme, globex = merchants
    page = admin_client.get("/admin/payment/paymenttransaction/", {"merchant": str(acme)}).content.decode()
    assert f"acme-{acme}" in page and f"globex-{globex}" not in page
    assert f'?merchant={globex}"' in page  # the other merchant is a choice of the filter
    nothing = admin_client.get("/admin/payment/paymenttransaction/", {"merchant": "not-an-id"})
    assert nothing.status_code == 200 and f"acme-{acme}" not in nothing.content.decode()


def test_commerce_down_degrades_to_the_bare_id(admin_client, settings, merchants):
    acme, _ = merchants
    settings.ADMIN_COMMERCE_URL = f"http://127.0.0.1:{free_port()}"
    transaction = PaymentTransaction.objects.get(merchant_id=acme)
    PaymentAttempt.objects.create(transaction=transaction, merchant_id=acme, channel="QR", code=f"SW{acme}", amount=250)
    page = admin_client.get("/admin/payment/paymenttransaction/")
    assert page.status_code == 200
    assert "11.00 EUR" in page.content.decode() and str(acme) in page.content.decode()
    assert "Acme Shop" not in page.content.decode()
    assert cache.get(COMMERCE_DOWN_KEY)  # the next pages do not wait for commerce again
    detail = admin_client.get(f"/admin/payment/paymenttransaction/{transaction.pk}/change/").content.decode()
    assert "2.50 EUR" in detail and "11.00 EUR" in detail  # the attempt inline in the transaction's currency


def test_commerce_answers_the_admins_request_with_merchants_names(client):
    """What the admins' one request per page asks of the real commerce, as a service's own account
    (every account that asks: tests/kernel/test_service_accounts.py)."""
    merchant = Merchant.objects.create(name="Named Shop", slug=f"named-{secrets.token_hex(6)}", default_currency="EUR", country="FR")
    other = Merchant.objects.create(name="Other Shop", slug=f"other-{secrets.token_hex(6)}", default_currency="EUR", country="FR")
    response = client.get(
        "/v1/api/commerce/merchants",
        {"ids": f"{merchant.id},{MAX_ID}", "pageSize": MERCHANT_PAGE_SIZE},
        HTTP_AUTHORIZATION=basic_auth_header("finance"),
    )
    assert response.status_code == 200
    assert [{"id": str(merchant.id), "name": "Named Shop"}.items() <= row.items() for row in response.json()["results"]] == [True]
    assert str(other.id) not in response.content.decode()


@pytest.mark.parametrize("ids", [",".join(["1"] * 201), "1,x", "0"])
def test_commerce_refuses_an_id_list_it_cannot_answer_in_one_page(client, ids):
    response = client.get("/v1/api/commerce/merchants", {"ids": ids}, HTTP_AUTHORIZATION=basic_auth_header("finance"))
    assert response.status_code == 400, response.content
