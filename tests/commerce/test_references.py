"""A tax group on a product and a finance account on a sale order, named by a user: commerce asks
their owners (taxation, finance), with its own service account, whether the record is the
merchant's (merchant_platform.references). The owners run behind the live server."""

from __future__ import annotations

import pytest

from apps.commerce.models import Product, SaleOrder
from tests.commerce.conftest import new_merchant, new_product, new_variant
from tests.support.auth import make_caller
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)
PRODUCTS, ORDERS = "/v1/api/commerce/products", "/v1/api/commerce/sale-orders"
MISSING = "999999999999"


@pytest.fixture
def owners(live_server, settings):
    settings.COMMERCE_TAXATION_URL = f"{live_server.url}/v1/api/taxation"
    settings.COMMERCE_FINANCE_URL = f"{live_server.url}/v1/api/finance"


@pytest.fixture
def shop(seeded):
    merchant = new_merchant()
    variant = new_variant(new_product(merchant.id).id, price_amount=1250)
    return merchant, variant, make_caller(roles=[("OWNER", merchant.id)], merchants=[merchant.id]).client()


def dead_url(path: str) -> str:
    return f"http://127.0.0.1:{free_port()}{path}"


def tax_group(merchant_id: int) -> str:
    from apps.taxation.services import tax_group_create

    return str(tax_group_create(merchant_id=merchant_id, name="VAT", items=[{"name": "VAT", "rate": "0.2"}]).id)


def cash_account(merchant_id: int) -> str:
    from apps.finance.services import accounts_ensure_defaults

    return str(next(a.id for a in accounts_ensure_defaults(merchant_id=merchant_id, currency="EUR") if a.system_role == "CASH"))


def order_body(merchant, variant, **fields) -> dict:
    return {"merchantId": str(merchant.id), "lines": [{"variantId": str(variant.id), "quantity": 1}], **fields}


def fields_of(response) -> list[str]:
    return [error["field"] for error in response.json()["errors"]]


class TestATaxGroupOnAProduct:
    def test_the_merchants_own_group_is_taken_on_create_and_update(self, owners, shop):
        merchant, _, client = shop
        group = tax_group(merchant.id)

        created = client.post(PRODUCTS, {"merchantId": str(merchant.id), "name": "Lamp", "taxGroupId": group}, format="json")
        updated = client.patch(f"{PRODUCTS}/{created.json()['id']}", {"taxGroupId": tax_group(merchant.id)}, format="json")

        assert created.status_code == 201 and created.json()["taxGroupId"] == group
        assert updated.status_code == 200, updated.json()

    def test_another_merchants_group_or_none_at_all_is_a_400_and_nothing_is_written(self, owners, shop):
        merchant, _, client = shop
        product = new_product(merchant.id)
        for group in (tax_group(new_merchant().id), MISSING):
            created = client.post(PRODUCTS, {"merchantId": str(merchant.id), "name": "Stolen", "taxGroupId": group}, format="json")
            updated = client.patch(f"{PRODUCTS}/{product.id}", {"taxGroupId": group}, format="json")

            assert (created.status_code, fields_of(created)) == (400, ["taxGroupId"])
            assert (updated.status_code, fields_of(updated)) == (400, ["taxGroupId"])
        assert not Product.objects.filter(merchant_id=merchant.id, name="Stolen").exists()
        product.refresh_from_db()
        assert product.tax_group_id is None

    def test_taxation_unreachable_is_a_503_and_nothing_is_written(self, shop, settings):
        merchant, _, client = shop
        settings.COMMERCE_TAXATION_URL = dead_url("/v1/api/taxation")

        response = client.post(PRODUCTS, {"merchantId": str(merchant.id), "name": "Unchecked", "taxGroupId": "42"}, format="json")

        assert response.status_code == 503
        assert not Product.objects.filter(merchant_id=merchant.id, name="Unchecked").exists()


class TestAFinanceAccountOnASaleOrder:
    def test_the_merchants_own_account_is_taken_on_create_and_update(self, owners, shop):
        merchant, variant, client = shop
        account = cash_account(merchant.id)

        created = client.post(ORDERS, order_body(merchant, variant, financeAccountId=account), format="json")
        updated = client.patch(f"{ORDERS}/{created.json()['id']}", {"financeAccountId": account}, format="json")

        assert created.status_code == 201 and created.json()["financeAccountId"] == account
        assert updated.status_code == 200, updated.json()

    def test_another_merchants_account_or_none_at_all_is_a_400_and_nothing_is_written(self, owners, shop):
        merchant, variant, client = shop
        draft = client.post(ORDERS, order_body(merchant, variant), format="json").json()
        for account in (cash_account(new_merchant().id), MISSING):
            created = client.post(ORDERS, order_body(merchant, variant, financeAccountId=account), format="json")
            updated = client.patch(f"{ORDERS}/{draft['id']}", {"financeAccountId": account}, format="json")

            assert (created.status_code, fields_of(created)) == (400, ["financeAccountId"])
            assert (updated.status_code, fields_of(updated)) == (400, ["financeAccountId"])
        assert list(SaleOrder.objects.filter(merchant_id=merchant.id).values_list("finance_account_id", flat=True)) == [None]

    def test_finance_unreachable_is_a_503_and_nothing_is_written(self, shop, settings):
        merchant, variant, client = shop
        settings.COMMERCE_FINANCE_URL = dead_url("/v1/api/finance")

        response = client.post(ORDERS, order_body(merchant, variant, financeAccountId="42"), format="json")

        assert response.status_code == 503
        assert not SaleOrder.objects.filter(merchant_id=merchant.id).exists()
