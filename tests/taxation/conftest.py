"""Fixtures of taxation's tests: the seeds, callers, and tax groups made through the services."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.taxation import services

BASE = "/v1/api/taxation"
MERCHANT, OTHER_MERCHANT = 5_000_001, 5_000_002


@pytest.fixture
def make_caller(make_caller, seeded):
    """Callers whose roles carry taxation's seeded baseline."""
    return make_caller


@pytest.fixture
def admin(make_caller):
    return make_caller(roles=["ADMIN"]).client()


@pytest.fixture
def owner(make_caller):
    """The merchant's OWNER with the seeded baseline."""
    return make_caller(roles=[("OWNER", MERCHANT)], merchants=[MERCHANT]).client()


def item(name: str, rate: str, **extra) -> dict:
    return {"name": name, "rate": Decimal(rate), **extra}


@pytest.fixture
def make_group():
    def make(*items: dict, merchant_id: int = MERCHANT, name: str = "Standard"):
        return services.tax_group_create(merchant_id=merchant_id, name=name, items=list(items) or [item("VAT", "10")])

    return make


def learn_product(product_id: int, merchant_id: int = MERCHANT, *, live: bool = True) -> None:
    """Taxation learns a commerce product (its merchant) as the product change stream tells it."""
    services.product_apply(product_id=product_id, merchant_id=merchant_id, tax_group_id=None, live=live)
