"""Commerce test helpers: records made through the service functions."""

from __future__ import annotations

import itertools
import secrets
from types import SimpleNamespace

import pytest

from apps.commerce import seeds, services
from apps.inventory import services as inventory
from tests.payment.conftest import add_integration
from tests.support.auth import make_caller

_counter = itertools.count(1)


def new_merchant(*, created_by: int | None = None, **fields):
    n = next(_counter)
    values = {"name": f"Shop {n}", "slug": f"shop-{n}-{id(fields)}", "default_currency": "EUR", "country": "FR", **fields}
    return services.merchant_create(created_by=created_by, **values)


def new_product(merchant_id: int, **fields):
    return services.product_create(merchant_id=merchant_id, **{"name": "Lamp", **fields})


def new_variant(product_id: int, **fields):
    n = next(_counter)
    return services.variant_create(product_id=product_id, **{"sku": f"SKU-{n}", "price_amount": 1250, "currency": "EUR", **fields})


@pytest.fixture
def owner(seeded):
    """A user holding OWNER everywhere, as sign-up gives a seller: it may create merchants."""
    return make_caller(roles=["OWNER"])


@pytest.fixture
def shop(live_server, settings):
    """A merchant (its OWNER's client), a product with a variant of 10 units in stock at inventory, a
    SYSTEM payment integration, and commerce pointed at the live server's taxation, inventory and payment."""
    seeds.run()
    base = live_server.url
    settings.COMMERCE_INVENTORY_URL = f"{base}/v1/api/inventory"
    settings.COMMERCE_TAXATION_URL = f"{base}/v1/api/taxation"
    settings.COMMERCE_PAYMENT_URL = f"{base}/v1/api/payment"
    settings.COMMERCE_PAYMENT_WEBHOOK_URL = f"{base}/v1/api/commerce/payment-webhooks"
    caller = make_caller(roles=["OWNER"])
    merchant = new_merchant(created_by=caller.user_id)
    product = new_product(merchant.id)
    variant = new_variant(product.id, price_amount=1250)
    item = inventory.item_sync(
        variant_id=variant.id, merchant_id=merchant.id, product_id=product.id, sku=variant.sku, currency="EUR", unit_cost_amount=700
    )
    inventory.stock_adjust(item_id=item.id, delta=10, reason="initial stock")
    secret = "prov-" + secrets.token_hex(16)
    add_integration(merchant.id, channel="SYSTEM", secret=secret)
    return SimpleNamespace(
        client=caller.client(), merchant=merchant, product=product, variant=variant, item=item, secret=secret, base=base, settings=settings
    )
