"""Finance's consumers on the real broker: the MERCHANT stream from commerce's real CDC relay
creating the default and control accounts (replays included); payment, COGS and stock-adjustment
events posting their vouchers once (redelivered to a fresh group, re-published under a new message
id); a payment without financeAccountId skipped with an info log; poison messages on the DLQ."""

from __future__ import annotations

import json
import signal
import uuid

import pytest
from django.utils import timezone

from apps.commerce import services as commerce
from apps.finance import services
from apps.finance.consumers import (
    ADJUSTMENT_CONSUMER,
    COGS_CONSUMER,
    MERCHANT_CONSUMER,
    PAYMENT_CONSUMER,
    REFUND_CONSUMER,
    RETURNED_CONSUMER,
)
from apps.finance.models import Account, ProcessedMessage, Voucher
from merchant_platform.cdc import Capture
from merchant_platform.messaging.registry import registered_consumers
from merchant_platform.money import MAX_AMOUNT
from tests.finance.conftest import books, invariant_violations, new_merchant_id
from tests.support.broker import committed_offsets, produce, read_topic, unique
from tests.support.cdc import commerce_relay
from tests.support.consumers import consumer_spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


@pytest.fixture
def consume(run_consumer):
    """Run a registered finance consumer on a test topic, in a group of its own."""
    return lambda name, topic, group=None: run_consumer(consumer_spec(name, topic, group=group, max_retries=1))


def test_consumers_are_registered_in_the_finance_group():
    specs = {spec.name: spec for spec in registered_consumers(services={"finance"})}
    assert set(specs) == {MERCHANT_CONSUMER, PAYMENT_CONSUMER, COGS_CONSUMER, ADJUSTMENT_CONSUMER, REFUND_CONSUMER, RETURNED_CONSUMER}
    assert {spec.group_id for spec in specs.values()} == {"SVC-00040-FINANCE_CONSUMER_GROUP"}
    assert specs[MERCHANT_CONSUMER].topics == ("cdc.commerce.merchant",)
    assert specs[PAYMENT_CONSUMER].topics == ("payment.success",)
    assert (specs[COGS_CONSUMER].topics, specs[ADJUSTMENT_CONSUMER].topics) == (("inventory.cogs",), ("inventory.stock-adjusted",))
    assert (specs[REFUND_CONSUMER].topics, specs[RETURNED_CONSUMER].topics) == (("payment.refunded",), ("inventory.returned",))
    assert all(spec.alias == "finance" and spec.idempotent for spec in specs.values())


def test_merchant_stream_from_the_real_relay_creates_the_chart_once(make_topic, slot, consume):
    topic = make_topic(prefix="finance-merchant", partitions=1)
    relay = commerce_relay(slot, [Capture(topic=topic, model="commerce.Merchant")])
    relay.setup()
    merchant = commerce.merchant_create(
        name="Lamp shop", slug=f"lamps-{uuid.uuid4().hex[:8]}", default_currency="EUR", country="FR", created_by=42
    )
    commerce.merchant_update(merchant_id=merchant.id, name="Lamp shop SARL")  # an update: still one chart
    commerce.merchant_update(merchant_id=merchant.id, default_currency="USD")  # a new currency: its chart too
    published = 0
    for _ in range(50):
        published += relay.poll_once()
        if published >= 3:
            break
    relay.close()
    assert published == 3
    consume(MERCHANT_CONSUMER, topic)
    charts = 2 * len(services.DEFAULT_CHART)
    wait_for(lambda: Account.objects.filter(merchant_id=merchant.id).count() == charts, message="both charts")
    # A replay of the whole stream (a lost offset, a re-snapshot) changes nothing.
    consume(MERCHANT_CONSUMER, topic)
    wait_for(lambda: ProcessedMessage.objects.filter(consumer=MERCHANT_CONSUMER).count() >= 3, message="processed")
    roles = set(Account.objects.filter(merchant_id=merchant.id, currency="EUR").values_list("system_role", flat=True))
    assert {"INVENTORY", "COGS"} <= roles
    assert Account.objects.filter(merchant_id=merchant.id).count() == charts
    assert set(Account.objects.filter(merchant_id=merchant.id).values_list("created_by", flat=True)) == {42}


def _change(row: dict, op: str = "c") -> dict:
    return {
        "before": None,
        "after": row,
        "op": op,
        "ts_ms": 1,
        "transaction": None,
        "source": {"db": "x", "schema": "allocation", "table": "merchant", "lsn": 1},
    }


def test_soft_deleted_merchant_changes_nothing_and_a_tombstone_is_ignored(make_topic, raw_producer, consume):
    topic, merchant = make_topic(partitions=1), new_merchant_id()
    row = {"id": merchant, "default_currency": "EUR", "deleted_at": "2026-01-01T00:00:00Z", "created_by": None}
    produce(raw_producer, topic, [_change(row, "u")], key={"id": merchant}, headers={"messageId": unique("m")})
    raw_producer.send(topic, value=None, key=b'{"id": 1}').get(timeout=10)
    running = consume(MERCHANT_CONSUMER, topic)
    wait_for(lambda: ProcessedMessage.objects.filter(consumer=MERCHANT_CONSUMER).count() == 2, message="both handled")
    running.finish()
    assert not Account.objects.filter(merchant_id=merchant).exists()


def _payment(account, amount=1000, attempt="att-1", **attempt_fields):
    return {
        "event": "attempt.success",
        "timestamp": "2026-11-25T10:00:00.000Z",
        "source": "payment",
        "transaction": {"id": "7", "sourceId": "order-1", "status": "NEW"},
        "attempt": {
            "id": attempt,
            "code": "A1",
            "status": "302_SUCCESS",
            "amount": amount,
            "financeAccountId": str(account.id),
            "merchantId": str(account.merchant_id),
            **attempt_fields,
        },
    }


def test_payment_success_posts_one_sale_voucher_even_when_delivered_again(make_topic, raw_producer, consume, log_lines):
    chart = books()
    topic = make_topic(partitions=1)
    value = _payment(chart["BANK"], currency="EUR")
    produce(raw_producer, topic, [value], headers={"messageId": unique("pay")})
    produce(raw_producer, topic, [value], headers={"messageId": unique("pay")})  # re-published: a new message id
    no_account = _payment(chart["BANK"], attempt="att-2")
    del no_account["attempt"]["financeAccountId"]
    produce(raw_producer, topic, [no_account, {**_payment(chart["BANK"], attempt="att-3"), "event": "attempt.created"}])
    consume(PAYMENT_CONSUMER, topic)
    wait_for(lambda: ProcessedMessage.objects.filter(consumer=PAYMENT_CONSUMER).count() == 4, message="4 messages")
    consume(PAYMENT_CONSUMER, topic)  # a fresh group: every message redelivered (offsets lost)
    wait_for(
        lambda: ProcessedMessage.objects.filter(consumer=PAYMENT_CONSUMER).count() == 4 and log_lines.matching("consumer.replay_skipped"),
        message="replays",
    )
    (voucher,) = Voucher.objects.filter(merchant_id=chart["BANK"].merchant_id)
    assert (voucher.kind, voucher.source_id, str(voucher.date)) == ("SALE", "att-1", "2026-11-25")
    assert Account.objects.get(pk=chart["BANK"].pk).balance == 1000
    assert log_lines.matching("finance.voucher.idempotent_replay", str(voucher.id))
    assert log_lines.matching("finance.payment.skipped", "no financeAccountId")
    assert invariant_violations([voucher.merchant_id]) == []


def test_inventory_cogs_and_adjustments_post_once(make_topic, raw_producer, consume):
    chart = books()
    merchant = str(chart["COGS"].merchant_id)
    cogs_topic, adjusted_topic = make_topic(partitions=1), make_topic(partitions=1)
    cogs = {"orderId": "order-9", "merchantId": merchant, "currency": "EUR", "totalCostAmount": 700, "lines": []}
    produce(raw_producer, cogs_topic, [cogs, cogs], headers={})  # no messageId: dedup by position, then by the order
    adjustments = [
        {
            "kind": "CYCLE_COUNT",
            "referenceId": "t-1",
            "merchantId": merchant,
            "currency": "EUR",
            "reason": "count",
            "totalValueAmount": -200,
            "lines": [],
        },
        {
            "kind": "ADJUSTMENT",
            "referenceId": "a-2",
            "merchantId": merchant,
            "currency": "EUR",
            "reason": "found",
            "totalValueAmount": 50,
            "lines": [],
        },
    ]
    produce(raw_producer, adjusted_topic, adjustments + adjustments[:1])
    consume(COGS_CONSUMER, cogs_topic)
    consume(ADJUSTMENT_CONSUMER, adjusted_topic)
    wait_for(lambda: Voucher.objects.filter(merchant_id=chart["COGS"].merchant_id).count() == 3, message="3 vouchers")
    wait_for(lambda: ProcessedMessage.objects.filter(consumer__in=[COGS_CONSUMER, ADJUSTMENT_CONSUMER]).count() == 5, message="all handled")
    kinds = sorted(Voucher.objects.filter(merchant_id=chart["COGS"].merchant_id).values_list("kind", flat=True))
    assert kinds == ["COGS", "INVENTORY_ADJUSTMENT", "INVENTORY_ADJUSTMENT"]
    assert Account.objects.get(pk=chart["INVENTORY"].pk).balance == -700 - 200 + 50
    assert Account.objects.get(pk=chart["COGS"].pk).balance == 700


def test_poison_messages_go_to_the_dlq_and_later_ones_flow(make_topic, raw_producer, consume, log_lines):
    chart = books()
    topic = make_topic(partitions=1)
    produce(raw_producer, topic, [b"not json", {"orderId": "o", "merchantId": "x", "currency": "EUR", "totalCostAmount": 5}])
    # No control accounts for this merchant: logged, retried, then parked.
    produce(raw_producer, topic, [{"orderId": "o-2", "merchantId": str(new_merchant_id()), "currency": "EUR", "totalCostAmount": 5}])
    produce(
        raw_producer, topic, [{"orderId": "o-3", "merchantId": str(chart["COGS"].merchant_id), "currency": "EUR", "totalCostAmount": 5}]
    )
    consume(COGS_CONSUMER, topic)
    wait_for(lambda: Voucher.objects.filter(merchant_id=chart["COGS"].merchant_id).exists(), timeout=40, message="the good message")
    parked = read_topic(f"{topic}.DLQ", expected=3)
    assert len(parked) == 3
    assert log_lines.matching("INVENTORY/COGS control account missing")


def test_the_body_payment_builds_for_attempt_success_posts_a_sale(make_topic, raw_producer, consume):
    """The body payment publishes on payment.success (apps/payment/events.py builds it)."""
    from types import SimpleNamespace

    from apps.payment.events import attempt_body, transaction_body

    chart = books()
    now = timezone.now()
    txn = SimpleNamespace(
        id=11,
        merchant_id=chart["BANK"].merchant_id,
        source_id="order-77",
        source_type="ORDER",
        amount=2500,
        tax_amount=None,
        paid_amount=2500,
        currency="EUR",
        finance_account_id=chart["BANK"].id,
        lines=[],
        status="NEW",
        created_at=now,
        settled_at=None,
        cancelled_at=None,
    )
    attempt = SimpleNamespace(
        id=12, transaction_id=11, merchant_id=txn.merchant_id, channel="QR", code="PA1", amount=2500, status="302_SUCCESS",
        provider_reference="p", bank_code="NCB", failure_reason="", expires_at=None, paid_at=now,
    )  # fmt: skip
    body = {"event": "attempt.success", "timestamp": now.isoformat(), "source": "payment", "transaction": transaction_body(txn)}
    body["attempt"] = attempt_body(attempt, txn)
    foreign = books()
    wrong_merchant = {**body, "attempt": {**body["attempt"], "id": "13", "financeAccountId": str(foreign["BANK"].id)}}
    topic = make_topic(partitions=1)
    produce(raw_producer, topic, [body, wrong_merchant, {**body, "event": "transaction.settled"}], headers={})
    consume(PAYMENT_CONSUMER, topic)
    wait_for(lambda: Voucher.objects.filter(merchant_id=txn.merchant_id).exists(), message="the sale")
    parked = read_topic(f"{topic}.DLQ", expected=1, timeout=30)
    assert len(parked) == 1
    (voucher,) = Voucher.objects.filter(merchant_id=txn.merchant_id)
    assert (voucher.kind, voucher.source_id) == ("SALE", "12")
    assert Account.objects.get(pk=chart["SALES"].pk).balance == 2500
    assert not Voucher.objects.filter(merchant_id=foreign["BANK"].merchant_id).exists()


def test_killed_between_the_database_commit_and_the_offset_commit_it_posts_nothing_twice(make_topic, raw_producer, spawn, subprocess_env):
    chart = books()
    merchant = str(chart["COGS"].merchant_id)
    topic, group = make_topic(partitions=1), unique("finance-test")
    values = [{"orderId": f"k-{n}", "merchantId": merchant, "currency": "EUR", "totalCostAmount": 100 * n} for n in (1, 2)]
    produce(raw_producer, topic, values, headers={})
    command = ("-m", "tests.kernel.events.consume", COGS_CONSUMER, topic, group)
    first = spawn(*command, env=subprocess_env(CONSUME_KILL_AT="2"), name="dies")  # after the commit holding k-2
    assert first.wait(timeout=60) == -signal.SIGKILL, first.output
    assert Voucher.objects.filter(merchant_id=chart["COGS"].merchant_id).count() == 2  # both committed
    assert committed_offsets(group, topic) != {0: 2}  # the offset of k-2 was not
    produce(raw_producer, topic, [{"orderId": "k-3", "merchantId": merchant, "currency": "EUR", "totalCostAmount": 300}], headers={})
    spawn(*command, name="restarts")
    wait_for(lambda: committed_offsets(group, topic) == {0: 3}, timeout=60, message="offsets after the restart")
    sources = sorted(Voucher.objects.filter(merchant_id=chart["COGS"].merchant_id).values_list("source_id", flat=True))
    assert sources == ["k-1/EUR", "k-2/EUR", "k-3/EUR"]
    assert Account.objects.get(pk=chart["COGS"].pk).balance == 600
    assert invariant_violations([chart["COGS"].merchant_id]) == []


def test_a_stream_of_cogs_events_posts_in_batches_and_keeps_the_invariants(make_topic, raw_producer, consume):
    charts = [books(), books()]
    topic = make_topic(partitions=1)
    values = [
        {"orderId": f"b-{n}", "merchantId": str(charts[n % 2]["COGS"].merchant_id), "currency": "EUR", "totalCostAmount": n + 1}
        for n in range(300)
    ]
    for value in values:
        raw_producer.send(topic, value=json.dumps(value).encode())
    raw_producer.flush()
    consume(COGS_CONSUMER, topic)
    merchants = [chart["COGS"].merchant_id for chart in charts]
    wait_for(lambda: Voucher.objects.filter(merchant_id__in=merchants).count() == 300, timeout=60, message="300 vouchers")
    assert invariant_violations(merchants) == []
    assert Account.objects.get(pk=charts[0]["COGS"].pk).balance == sum(n + 1 for n in range(0, 300, 2))


def _dead_letter_errors(topic: str, expected: int) -> list[str]:
    return [dict(record.headers)["dlq.error"].decode() for record in read_topic(f"{topic}.DLQ", expected=expected, timeout=30)]


def test_a_usd_sale_and_a_usd_cogs_of_an_eur_merchant_post_to_usd_accounts_and_nothing_is_parked(
    make_topic, raw_producer, consume, log_lines
):
    chart = books()
    merchant = chart["BANK"].merchant_id
    payments, cogs = make_topic(partitions=1), make_topic(partitions=1)
    produce(raw_producer, payments, [_payment(chart["BANK"], 2500, "att-usd", currency="USD")])
    produce(raw_producer, cogs, [{"orderId": "order-usd", "merchantId": str(merchant), "currency": "USD", "totalCostAmount": 700}])
    consume(PAYMENT_CONSUMER, payments)
    consume(COGS_CONSUMER, cogs)
    wait_for(lambda: Voucher.objects.filter(merchant_id=merchant).count() == 2, message="the sale and the COGS")
    usd = {a.system_role: a for a in Account.objects.filter(merchant_id=merchant, currency="USD")}
    assert (usd["BANK"].balance, usd["SALES"].balance, usd["COGS"].balance, usd["INVENTORY"].balance) == (2500, 2500, 700, -700)
    assert Account.objects.get(pk=chart["BANK"].pk).balance == 0
    assert not log_lines.matching("consumer.dead_lettered")
    assert invariant_violations([merchant]) == []


def test_events_naming_another_merchants_records_are_parked_at_once_with_the_reason(make_topic, raw_producer, consume):
    mine, theirs = books(), books()
    merchant = str(mine["BANK"].merchant_id)
    topic = make_topic(partitions=1)
    foreign_account = _payment(theirs["BANK"], attempt="x-1", merchantId=merchant)
    no_merchant = _payment(mine["BANK"], attempt="x-2")
    del no_merchant["attempt"]["merchantId"]
    disagreeing = _payment(mine["BANK"], attempt="x-3", merchantId=merchant)
    disagreeing["transaction"]["merchantId"] = str(theirs["BANK"].merchant_id)
    produce(raw_producer, topic, [foreign_account, no_merchant, disagreeing, _payment(mine["BANK"], attempt="ok", merchantId=merchant)])
    consume(PAYMENT_CONSUMER, topic)
    wait_for(lambda: Voucher.objects.filter(source_id="ok").exists(), message="the good payment")
    errors = _dead_letter_errors(topic, 3)
    assert len(errors) == 3
    assert "another merchant" in errors[0] and "merchantId" in errors[1] and "merchantId" in errors[2]
    parked = read_topic(f"{topic}.DLQ", expected=3)
    assert {dict(record.headers)["dlq.attempts"] for record in parked} == {b"1"}  # no retry can fix them
    assert not Voucher.objects.filter(merchant_id=theirs["BANK"].merchant_id).exists()
    assert Voucher.objects.filter(merchant_id=mine["BANK"].merchant_id).count() == 1


def test_a_sale_past_the_balance_limit_is_parked_with_the_reason(make_topic, raw_producer, consume):
    chart = books()
    merchant = chart["BANK"].merchant_id
    lines = [{"account_id": chart["BANK"].id, "debit": MAX_AMOUNT}] * 9 + [{"account_id": chart["SALES"].id, "credit": MAX_AMOUNT}] * 9
    services.voucher_post(merchant_id=merchant, kind="SALE", lines=lines)
    topic = make_topic(partitions=1)
    produce(raw_producer, topic, [_payment(chart["BANK"], MAX_AMOUNT, "too-big")])
    consume(PAYMENT_CONSUMER, topic)
    (error,) = _dead_letter_errors(topic, 1)
    assert "BALANCE_LIMIT_EXCEEDED" in error and str(chart["BANK"].id) in error
    assert not Voucher.objects.filter(source_id="too-big").exists()


def test_an_inclusive_tax_payment_event_posts_net_revenue_and_tax_payable(make_topic, raw_producer, consume):
    """What payment.success carries for an order priced 1200 with VAT 20% included: the attempt's
    amount is the gross, `transaction.taxAmount` the tax inside it."""
    chart = books()
    merchant = chart["CASH"].merchant_id
    value = _payment(chart["CASH"], 1200, "att-vat")
    value["transaction"].update({"merchantId": str(merchant), "amount": 1200, "paidAmount": 1200, "taxAmount": 200, "currency": "EUR"})
    topic = make_topic(partitions=1)
    produce(raw_producer, topic, [value])
    consume(PAYMENT_CONSUMER, topic)
    wait_for(lambda: Voucher.objects.filter(merchant_id=merchant).exists(), message="the sale")
    (sale,) = Voucher.objects.filter(merchant_id=merchant)
    lines = {(line.account.system_role, line.debit, line.credit) for line in sale.lines.select_related("account")}
    assert lines == {("CASH", 1200, 0), ("SALES", 0, 1000), ("TAX_PAYABLE", 0, 200)}
