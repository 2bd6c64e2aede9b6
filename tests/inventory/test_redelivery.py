"""A payment.success consumer killed mid-stream (SIGKILL, no goodbye) redelivers what it had not
committed and deducts every order exactly once (spec 6.2: offsets committed after handling, handlers
idempotent)."""

from __future__ import annotations

import signal

import pytest
from django.db.models import Count

from apps.inventory.consumers import PAYMENT_CONSUMER
from apps.inventory.models import Tracking
from tests.inventory.conftest import new_id, new_item, stock_of
from tests.inventory.test_payment_success import paid
from tests.support.broker import produce, unique
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(databases="__all__", transaction=True), pytest.mark.slow]
ORDERS = 300


def deducted(prefix: str) -> int:
    return Tracking.objects.filter(operation="DEDUCT", reference_id__startswith=prefix).count()


def test_killed_consumer_redelivers_and_deducts_each_order_once(make_topic, raw_producer, spawn, subprocess_env):
    topic, group, prefix, merchant = make_topic(partitions=1), unique("inventory-kill"), unique("k"), new_id()
    item = new_item(merchant, on_hand=1000)
    produce(raw_producer, topic, [paid(f"{prefix}-{n}", merchant, (item, 1)) for n in range(ORDERS)])
    env = subprocess_env(KAFKA_CONSUMER_MAX_POLL_RECORDS="1")  # one message per transaction: a kill lands mid-stream
    first = spawn("-m", "tests.kernel.events.consume", PAYMENT_CONSUMER, topic, group, env=env, name="consume")
    wait_for(lambda: deducted(prefix) >= 10, timeout=60, message="some deductions")
    first.signal(signal.SIGKILL, group=True)
    first.popen.wait(timeout=30)
    assert deducted(prefix) < ORDERS, "the consumer finished before it was killed: nothing was tested"
    spawn("-m", "tests.kernel.events.consume", PAYMENT_CONSUMER, topic, group, name="consume-again")  # default batches
    wait_for(lambda: deducted(prefix) >= ORDERS, timeout=120, message="every order")
    per_order = Tracking.objects.filter(reference_id__startswith=prefix, operation="DEDUCT").values("reference_id").annotate(n=Count("id"))
    assert {row["n"] for row in per_order} == {1} and len(per_order) == ORDERS
    assert stock_of(item).quantity_on_hand == 1000 - ORDERS
