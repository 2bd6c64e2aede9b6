"""Inventory test helpers: merchants and variants as commerce's change streams describe them,
items and stock made through the service functions, the consumers under the kernel's runner on
test topics, and the broker fixtures of tests/events."""

from __future__ import annotations

import itertools
import random
import threading

import pytest

from apps.inventory import seeds, services
from apps.inventory.models import Stock
from merchant_platform.messaging.registry import ConsumerSpec, registered_consumers
from merchant_platform.messaging.runner import ConsumerRunner
from tests.events.conftest import kafka_admin, make_topic, raw_producer, spawn, subprocess_env, test_database_url, unique  # noqa: F401 (fixtures)

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
def seeded():
    seeds.run()


@pytest.fixture
def merchant_id() -> int:
    return new_id()


class Running:
    """A registered inventory consumer under the kernel's runner, on a test topic and group."""

    def __init__(self, name: str, topic: str, **overrides):
        (registered,) = registered_consumers(names={name})
        self.spec = ConsumerSpec(
            **{**registered.__dict__, "topics": (topic,), "group_id": unique("inventory-test"), "retry_backoff_seconds": 0.05, **overrides}
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=ConsumerRunner(self.spec, self.stop).run, daemon=True)
        self.thread.start()

    def finish(self):
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
