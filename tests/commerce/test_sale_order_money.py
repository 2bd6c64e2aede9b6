"""Sale orders' money: totals are the sums of the lines as taxation computed them (inclusive,
exclusive and mixed tax groups), and the amount payment is asked for is that gross, with the tax it includes."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from apps.commerce.models import ProductVariant, SaleOrder
from apps.inventory import services as inventory
from apps.inventory.models import Reservation
from apps.payment.models import PaymentTransaction
from apps.taxation import services as taxation
from merchant_platform.money import MAX_AMOUNT
from tests.commerce.conftest import new_product, new_variant
from tests.commerce.test_sale_orders import ORDERS, create, place

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def taxed_variant(shop, *, price: int, items: list[dict]):
    """A new product of the shop in a new tax group of `items`, with one stocked variant at `price`."""
    group = taxation.tax_group_create(merchant_id=shop.merchant.id, name=f"group {len(items)}", items=items)
    product = new_product(shop.merchant.id, tax_group_id=group.id)
    taxation.tax_set_provision(product_id=product.id, tax_group_id=group.id, merchant_id=shop.merchant.id)
    variant = new_variant(product.id, price_amount=price)
    item = inventory.item_sync(
        variant_id=variant.id, merchant_id=shop.merchant.id, product_id=product.id, sku=variant.sku, currency="EUR", unit_cost_amount=1
    )
    inventory.stock_adjust(item_id=item.id, delta=10, reason="initial stock")
    return variant


def order_of_lines(shop, lines: list[tuple[object, int]]) -> dict:
    body = {
        "merchantId": str(shop.merchant.id),
        "lines": [{"variantId": str(variant.id), "quantity": quantity} for variant, quantity in lines],
        "paymentChannel": "SYSTEM",
    }
    created = shop.client.post(ORDERS, body, format="json")
    assert created.status_code == 201, created.json()
    placed = place(shop, created.json())
    assert placed.status_code == 200, placed.json()
    return placed.json()


def totals(order: dict) -> tuple[int, int, int]:
    return order["netAmount"], order["taxAmount"], order["grossAmount"]


def line_totals(order: dict) -> list[tuple[int, int, int]]:
    return [(line["netAmount"], line["taxAmount"], line["grossAmount"]) for line in order["lines"]]


def asked_of_payment(order: dict) -> int:
    return PaymentTransaction.objects.get(source_id=order["placementReference"]).amount


def tax_told_to_payment(order: dict) -> int | None:
    """The tax the transaction commerce opened says its amount includes (finance's SALE voucher splits on it)."""
    assert order["payment"]["taxAmount"] == order["taxAmount"]
    return PaymentTransaction.objects.get(source_id=order["placementReference"]).tax_amount


VAT_INCLUSIVE = [{"name": "VAT", "rate": Decimal(20), "inclusive": True}]
VAT_EXCLUSIVE = [{"name": "VAT", "rate": Decimal(20)}]


def test_an_inclusive_tax_is_inside_the_price(shop):
    variant = taxed_variant(shop, price=1200, items=VAT_INCLUSIVE)
    order = order_of_lines(shop, [(variant, 1)])
    assert line_totals(order) == [(1000, 200, 1200)]
    assert totals(order) == (1000, 200, 1200)
    assert asked_of_payment(order) == 1200
    assert tax_told_to_payment(order) == 200
    stored = SaleOrder.objects.get(pk=order["id"])
    assert (stored.net_amount, stored.tax_amount, stored.gross_amount) == (1000, 200, 1200)


def test_an_exclusive_tax_is_added_to_the_price(shop):
    variant = taxed_variant(shop, price=1200, items=VAT_EXCLUSIVE)
    order = order_of_lines(shop, [(variant, 2)])
    assert line_totals(order) == [(2400, 480, 2880)]
    assert totals(order) == (2400, 480, 2880)
    assert asked_of_payment(order) == 2880
    assert tax_told_to_payment(order) == 480


def test_mixed_groups_and_an_untaxed_line_sum_line_by_line(shop):
    inclusive = taxed_variant(shop, price=1200, items=VAT_INCLUSIVE)
    exclusive = taxed_variant(shop, price=1000, items=VAT_EXCLUSIVE)
    both = taxed_variant(
        shop, price=1100, items=[{"name": "VAT", "rate": Decimal(10), "inclusive": True}, {"name": "Levy", "rate": Decimal(5)}]
    )
    order = order_of_lines(shop, [(inclusive, 1), (exclusive, 1), (both, 2), (shop.variant, 1)])
    # both: 2 x 1100 = 2200 holds 10% inclusive (net 2000, tax 200) and 5% of the net on top (100).
    assert line_totals(order) == [(1000, 200, 1200), (1000, 200, 1200), (2000, 300, 2300), (1250, 0, 1250)]
    assert totals(order) == (5250, 700, 5950)
    assert asked_of_payment(order) == 5950
    assert tax_told_to_payment(order) == 700


def test_a_price_over_the_maximum_is_400_amount_too_large(shop):
    body = {"primaryProductId": str(shop.product.id), "sku": "HUGE", "priceAmount": 2**62, "currency": "EUR"}
    response = shop.client.post("/v1/api/commerce/variants", body, format="json")
    assert (response.status_code, response.json()["code"], response.json()["field"]) == (400, "AMOUNT_TOO_LARGE", "priceAmount")
    # The table holds the same limit: no write path can store more.
    with pytest.raises(IntegrityError), transaction.atomic(using="commerce"):
        ProductVariant.objects.filter(pk=shop.variant.id).update(price_amount=MAX_AMOUNT + 1)


def test_a_line_or_order_total_over_the_maximum_is_400_naming_it(shop):
    top = new_variant(shop.product.id, price_amount=MAX_AMOUNT)
    half = new_variant(shop.product.id, price_amount=MAX_AMOUNT // 2 + 1)
    cases = [
        ([(top, 2)], "lines[0]"),  # price x quantity
        ([(shop.variant, 1), (half, 2)], "lines[1]"),
        ([(top, 1), (shop.variant, 1)], "lines"),  # each line fits, their sum does not
    ]
    for lines, field in cases:
        body = {"merchantId": str(shop.merchant.id), "lines": [{"variantId": str(v.id), "quantity": q} for v, q in lines]}
        response = shop.client.post(ORDERS, body, format="json")
        assert (response.status_code, response.json()["code"], response.json()["field"]) == (400, "AMOUNT_TOO_LARGE", field), lines
    order = create(shop, quantity=1)
    changed = shop.client.patch(f"{ORDERS}/{order['id']}", {"lines": [{"variantId": str(top.id), "quantity": 3}]}, format="json")
    assert (changed.status_code, changed.json()["code"], changed.json()["field"]) == (400, "AMOUNT_TOO_LARGE", "lines[0]")
    assert SaleOrder.objects.get(pk=order["id"]).net_amount == 1250


def test_a_line_whose_tax_takes_it_over_the_maximum_is_400_and_holds_nothing(shop):
    variant = taxed_variant(shop, price=MAX_AMOUNT, items=VAT_EXCLUSIVE)
    body = {"merchantId": str(shop.merchant.id), "lines": [{"variantId": str(variant.id), "quantity": 1}], "paymentChannel": "SYSTEM"}
    order = shop.client.post(ORDERS, body, format="json").json()
    response = place(shop, order)
    assert (response.status_code, response.json()["code"], response.json()["field"]) == (400, "AMOUNT_TOO_LARGE", "lines[0]")
    assert SaleOrder.objects.get(pk=order["id"]).status == "DRAFT"
    assert not Reservation.objects.filter(order_id__startswith=order["id"]).exists()
    assert not PaymentTransaction.objects.filter(merchant_id=shop.merchant.id).exists()
