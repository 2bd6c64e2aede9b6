"""Commerce test helpers: records made through the service functions, and the broker fixtures of
tests/events for the change-stream tests."""

from __future__ import annotations

import itertools

import pytest

from apps.commerce import seeds, services
from tests.events.conftest import kafka_admin, make_topic, test_database_url  # noqa: F401 (fixtures)
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
def seeded():
    seeds.run()


@pytest.fixture
def owner(seeded):
    """A user holding OWNER everywhere, as sign-up gives a seller: it may create merchants."""
    return make_caller(roles=["OWNER"])
