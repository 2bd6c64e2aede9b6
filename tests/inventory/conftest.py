"""Inventory test helpers: merchants and variants as commerce's change streams describe them,
items and stock made through the service functions, and a merchant's shop."""

from __future__ import annotations

import itertools
import random

import pytest

from apps.inventory import services
from apps.inventory.models import Stock
from tests.support.auth import make_caller

_counter = itertools.count(1)


def new_id() -> int:
    return random.getrandbits(60) | (1 << 50)


def new_item(merchant_id: int, *, on_hand: int = 0, allow_oversell: bool = False, unit_cost_amount: int | None = 100, **fields):
    """An item as the PRODUCT_VARIANT stream creates it, with `on_hand` units at the default location."""
    n = next(_counter)
    item = services.item_sync(
        variant_id=new_id(),
        merchant_id=merchant_id,
        product_id=new_id(),
        sku=fields.pop("sku", f"SKU-{n}"),
        currency="EUR",
        unit_cost_amount=unit_cost_amount,
        **fields,
    )
    if allow_oversell:
        item = services.item_update(item_id=item.id, allow_oversell=True)
    if on_hand:
        services.stock_adjust(item_id=item.id, delta=on_hand, reason="initial stock")
    return item


def stock_of(item) -> Stock:
    return Stock.objects.get(item_id=item.id, location__is_default=True)


@pytest.fixture
def shop(seeded):
    """A merchant with its default location, and an employee's client."""
    merchant = new_id()
    services.location_ensure_default(merchant_id=merchant)
    return merchant, make_caller(roles=[("EMPLOYEE", merchant)]).client()


@pytest.fixture
def merchant_id() -> int:
    return new_id()
