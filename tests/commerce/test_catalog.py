"""Products and variants through HTTP: CRUD, SKU uniqueness per merchant among live rows, money as
integer minor units, filters, ordering and paging, and tenant isolation (another merchant's record
answers 404)."""

from __future__ import annotations

import pytest

from apps.commerce.models import Product, ProductVariant
from tests.commerce.conftest import new_merchant, new_product, new_variant
from tests.support.auth import make_caller

pytestmark = pytest.mark.django_db(databases="__all__")
PRODUCTS, VARIANTS = "/v1/api/commerce/products", "/v1/api/commerce/variants"


@pytest.fixture
def shop(seeded):
    """A merchant, and an employee of it."""
    merchant = new_merchant()
    return merchant, make_caller(roles=[("EMPLOYEE", merchant.id)]).client()


def test_employee_creates_a_product_and_its_variants(shop):
    merchant, client = shop
    created = client.post(PRODUCTS, {"merchantId": str(merchant.id), "name": "Desk lamp"}, format="json")
    assert created.status_code == 201, created.content
    product = created.json()
    assert (product["merchantId"], product["status"], product["taxGroupId"]) == (str(merchant.id), "DRAFT", None)
    body = {"primaryProductId": product["id"], "sku": "LAMP-RED", "priceAmount": 1250, "currency": "EUR", "attributes": {"colour": "red"}}
    variant = client.post(VARIANTS, body, format="json")
    assert variant.status_code == 201, variant.content
    assert variant.json() | {"id": None, "createdAt": None, "updatedAt": None, "createdBy": None} == {
        "id": None,
        "merchantId": str(merchant.id),
        "primaryProductId": product["id"],
        "sku": "LAMP-RED",
        "name": "",
        "priceAmount": 1250,
        "currency": "EUR",
        "unitCostAmount": None,
        "attributes": {"colour": "red"},
        "status": "ACTIVE",
        "createdBy": None,
        "createdAt": None,
        "updatedAt": None,
    }
    updated = client.patch(f"{VARIANTS}/{variant.json()['id']}", {"priceAmount": 1500, "unitCostAmount": 700}, format="json")
    assert updated.status_code == 200 and (updated.json()["priceAmount"], updated.json()["unitCostAmount"]) == (1500, 700)
    published = client.patch(f"{PRODUCTS}/{product['id']}", {"status": "PUBLISHED", "taxGroupId": None}, format="json")
    assert published.status_code == 200 and (published.json()["status"], published.json()["taxGroupId"]) == ("PUBLISHED", None)


def test_sku_is_unique_per_merchant_among_live_variants(shop):
    merchant, client = shop
    product = new_product(merchant.id)
    first = new_variant(product.id, sku="SKU-1")
    body = {"primaryProductId": str(product.id), "sku": "SKU-1", "priceAmount": 1, "currency": "EUR"}
    clash = client.post(VARIANTS, body, format="json")
    assert clash.status_code == 409 and clash.json()["code"] == "SKU_TAKEN"
    other = new_variant(product.id, sku="SKU-2")
    assert client.patch(f"{VARIANTS}/{other.id}", {"sku": "SKU-1"}, format="json").json()["code"] == "SKU_TAKEN"
    new_variant(new_product(new_merchant().id).id, sku="SKU-1")  # another merchant may use it
    ProductVariant.objects.get(pk=first.id).delete()
    assert client.post(VARIANTS, body, format="json").status_code == 201  # a deleted variant frees it


def test_deleting_a_product_soft_deletes_its_variants(shop):
    merchant, client = shop
    admin = make_caller(roles=[("ADMIN", merchant.id)]).client()
    product = new_product(merchant.id)
    variant = new_variant(product.id)
    assert client.delete(f"{PRODUCTS}/{product.id}").status_code == 403  # the baseline gives staff no delete
    assert admin.delete(f"{PRODUCTS}/{product.id}").status_code == 204
    assert admin.get(f"{VARIANTS}/{variant.id}").status_code == 404
    assert Product.all_objects.get(pk=product.id).is_deleted and ProductVariant.all_objects.get(pk=variant.id).is_deleted


def test_another_merchants_catalog_is_not_found(shop):
    _, client = shop
    elsewhere = new_merchant()
    product = new_product(elsewhere.id)
    variant = new_variant(product.id)
    assert client.get(f"{PRODUCTS}/{product.id}").status_code == 404
    assert client.patch(f"{PRODUCTS}/{product.id}", {"name": "x"}, format="json").status_code == 404
    assert client.delete(f"{VARIANTS}/{variant.id}").status_code == 404
    assert client.get(PRODUCTS).json()["results"] == []
    body = {"primaryProductId": str(product.id), "sku": "X", "priceAmount": 1, "currency": "EUR"}
    assert client.post(VARIANTS, body, format="json").status_code == 404  # named in the body: 404 too
    assert client.post(PRODUCTS, {"merchantId": str(elsewhere.id), "name": "x"}, format="json").status_code == 403


def test_a_product_cannot_move_to_another_merchant(shop):
    merchant, client = shop
    product = new_product(merchant.id)
    response = client.patch(f"{PRODUCTS}/{product.id}", {"merchantId": str(new_merchant().id)}, format="json")
    assert response.status_code == 400 and Product.objects.get(pk=product.id).merchant_id == merchant.id


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"priceAmount": -1}, "priceAmount"),
        ({"priceAmount": 12.5}, "priceAmount"),
        ({"priceAmount": "1250"}, "priceAmount"),
        ({"priceAmount": True}, "priceAmount"),
        ({"priceAmount": 2**63}, "priceAmount"),
        ({"unitCostAmount": -5}, "unitCostAmount"),
        ({"currency": "ABC"}, "currency"),
        ({"currency": 978}, "currency"),
        ({"attributes": ["a"]}, "attributes"),
        ({"attributes": {"k": "x" * 5000}}, "attributes"),
        ({"sku": ""}, "sku"),
        ({"sku": "a\tb"}, "sku"),
        ({"status": "GONE"}, "status"),
        ({"primaryProductId": "abc"}, "primaryProductId"),
        ({"merchantId": "1"}, "merchantId"),
    ],
)
def test_bad_variant_input_is_a_400_naming_the_field(shop, change, field):
    merchant, client = shop
    product = new_product(merchant.id)
    body = {"primaryProductId": str(product.id), "sku": "S", "priceAmount": 1, "currency": "EUR", **change}
    response = client.post(VARIANTS, body, format="json")
    assert response.status_code == 400, response.content
    assert field in {error["field"] for error in response.json()["errors"]}


def test_lists_filter_order_and_page(shop):
    merchant, client = shop
    lamp, desk = new_product(merchant.id, name="Lamp"), new_product(merchant.id, name="Desk", status="PUBLISHED")
    for sku, price in (("C", 300), ("A", 100), ("B", 200)):
        new_variant(lamp.id, sku=sku, price_amount=price)
    new_variant(desk.id, sku="D", price_amount=50)
    assert [p["name"] for p in client.get(PRODUCTS, {"status": "PUBLISHED"}).json()["results"]] == ["Desk"]
    assert [p["name"] for p in client.get(PRODUCTS, {"ordering": "name"}).json()["results"]] == ["Desk", "Lamp"]
    page = client.get(VARIANTS, {"primaryProductId": str(lamp.id), "ordering": "-priceAmount", "pageSize": 2}).json()
    assert page["count"] == 3 and [v["sku"] for v in page["results"]] == ["C", "B"]
    cheap = client.get(VARIANTS, {"maxPriceAmount": 150, "ordering": "sku"}).json()["results"]
    assert [v["sku"] for v in cheap] == ["A", "D"]
    for bad in ({"maxPriceAmount": -1}, {"minPriceAmount": "x"}, {"ordering": "cost"}, {"merchantId": "0"}, {"page": "0"}):
        response = client.get(VARIANTS, bad)
        assert response.status_code == 400, (bad, response.status_code)
