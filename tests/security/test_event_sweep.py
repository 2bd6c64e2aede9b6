"""The hostile-tenant sweep over events: messages that name merchant A's records under merchant B
(payment.success, commerce's change streams, activity notifications), each published on a test
topic and read by the registered consumer under the kernel's runner on the real broker. Each must be
refused with its reason on the topic's dead-letter topic, and nothing of A's may change (the same
snapshot of every service table as the HTTP sweep).

A case that today's consumer accepts is an xfail(strict=True) entry of EVENT_CASES naming the hole;
when the fix lands it XPASSes (a failure) and the mark goes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from merchant_platform.cdc.envelope import build_envelope
from merchant_platform.seeds import run_seeds
from tests.finance.test_refunds import refunded
from tests.security.tenants import Tenant, changes, seed_tenant, service_tables, snapshot
from tests.support.broker import committed_offsets, produce, read_topic
from tests.support.consumers import RunningConsumer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def change(table: str, row: dict) -> dict:
    """A commerce change-stream envelope (docs/events.md, "Commerce change streams") updating `row`."""
    source = {
        "version": "merchant-platform-cdc-1",
        "connector": "postgresql",
        "name": "commerce",
        "db": "merchant_platform",
        "schema": "allocation",
        "table": table,
        "lsn": 1,
        "ts_ms": 1,
        "snapshot": "false",
        "txId": 1,
        "sequence": '[null,"1"]',
        "xmin": None,
    }
    return build_envelope(op="u", before=None, after=row, source=source, ts_ms=1)


def paid_to_a_account(a: Tenant, b: Tenant) -> dict:
    """B's payment whose attempt credits A's finance account."""
    return {
        "event": "pay:attempt.success",
        "timestamp": "2026-11-25T13:00:00.000Z",
        "source": "payment",
        "transaction": {
            "id": b.ids["payment_transaction"],
            "sourceId": b.ids["sale_order"],
            "merchantId": b.ids["merchant"],
            "currency": "EUR",
        },
        "attempt": {
            "id": b.ids["payment_attempt"],
            "code": "SWEEP-1",
            "status": "302_SUCCESS",
            "amount": 700,
            "currency": "EUR",
            "merchantId": b.ids["merchant"],
            "financeAccountId": a.ids["finance_account"],
        },
    }


def refunded_from_a_account(a: Tenant, b: Tenant) -> dict:
    """B's succeeded refund (contract PAYMENT_REFUNDED) paid back out of A's finance account."""
    value = refunded(int(b.ids["merchant"]), int(a.ids["finance_account"]), refund_id=7391000000000077, amount=700, paid_amount=1500)
    value["transaction"]["id"] = value["refund"]["transactionId"] = b.ids["payment_transaction"]
    return value


def paid_with_a_variant(a: Tenant, b: Tenant) -> dict:
    """B's paid order whose line names A's variant: paid, it would deduct A's stock."""
    return {
        "event": "pay:attempt.success",
        "timestamp": "2026-11-25T13:00:00.000Z",
        "source": "payment",
        "transaction": {"id": b.ids["payment_transaction"], "sourceId": b.ids["sale_order"], "status": "SETTLED"},
        "attempt": {"id": b.ids["payment_attempt"], "code": "SWEEP-2", "status": "302_SUCCESS", "amount": 1250},
        "order": {"merchantId": b.ids["merchant"], "lines": [{"lineId": "1", "variantId": a.ids["variant"], "quantity": 2}]},
    }


def variant_of_a_moved_to_b(a: Tenant, b: Tenant) -> dict:
    """A PRODUCT_VARIANT change naming A's variant under merchant B."""
    row = {
        "id": int(a.ids["variant"]),
        "merchant_id": b.merchant_id,
        "primary_product_id": int(b.ids["product"]),
        "sku": "HIJACK-1",
        "name": "Hijacked",
        "status": "ACTIVE",
        "currency": "EUR",
        "unit_cost_amount": 1,
        "deleted_at": None,
    }
    return change("product_variant", row)


def product_of_a_under_b(a: Tenant, b: Tenant) -> dict:
    """A PRODUCT change naming A's product under merchant B, with B's tax group."""
    row = {
        "id": int(a.ids["product"]),
        "merchant_id": b.merchant_id,
        "tax_group_id": int(b.ids["tax_group"]),
        "name": "Hijacked",
        "status": "ACTIVE",
        "deleted_at": None,
    }
    return change("product", row)


def notification_into_a_room(a: Tenant, b: Tenant) -> dict:
    """An activity notification to B's owner in A's merchant room."""
    return {"recipientId": b.ids["user"], "topic": "order.paid", "room": f"merchant.{a.merchant_id}.commerce", "title": "Paid", "data": {}}


@dataclass(frozen=True)
class EventCase:
    consumer: str
    build: Callable[[Tenant, Tenant], dict]


def case(consumer: str, build: Callable, hole: str = "") -> pytest.param:
    marks = [pytest.mark.xfail(strict=True, reason=hole)] if hole else []
    return pytest.param(EventCase(consumer, build), marks=marks, id=f"{consumer}: {build.__name__}")


# Every consumer that reads a message naming another service's records, with the hostile message.
# The holes are today's behaviour (what happens; expected: parked on the DLQ with the reason).
EVENT_CASES = [
    case("finance.payment-success", paid_to_a_account),
    case("finance.payment-refunded", refunded_from_a_account),
    case("inventory.payment-success", paid_with_a_variant),
    case("inventory.product-variant", variant_of_a_moved_to_b),
    case("taxation.product-changes", product_of_a_under_b),
    case("signal.activity-notification", notification_into_a_room),
]


@pytest.fixture
def tenants() -> tuple[Tenant, Tenant]:
    run_seeds()
    return seed_tenant("a"), seed_tenant("b")


def handled(group: str, topic: str) -> bool:
    """The runner committed past the message (handled, or parked on the DLQ)."""
    return sum(offset or 0 for offset in committed_offsets(group, topic).values()) >= 1


@pytest.mark.parametrize("event", EVENT_CASES)
def test_an_event_naming_the_other_merchants_records_is_parked(event: EventCase, tenants, make_topic, raw_producer, kafka_admin):
    a, b = tenants
    tables = service_tables()
    topic = make_topic("hostile-tenant")
    before = snapshot(tables)
    runner = RunningConsumer.registered(event.consumer, topic, max_retries=0, offset_reset="earliest")
    try:
        produce(raw_producer, topic, [event.build(a, b)], key=b.ids["merchant"], headers={"messageId": f"sweep-{uuid.uuid4().hex}"})
        wait_for(lambda: handled(runner.spec.group_id, topic), message=f"{event.consumer} to handle the message")
    finally:
        runner.finish()
    changed = changes(before, snapshot(tables), a.merchant_id)
    dead_letters = f"{topic}.DLQ"
    parked = read_topic(dead_letters, expected=None) if dead_letters in kafka_admin.list_topics() else []
    reasons = [dict((name, value.decode()) for name, value in record.headers).get("dlq.error", "") for record in parked]
    assert not changed, f"{event.consumer} changed A's records: {changed}"
    assert len(parked) == 1 and reasons[0], f"{event.consumer} accepted a message naming A's records under B (DLQ: {reasons})"
