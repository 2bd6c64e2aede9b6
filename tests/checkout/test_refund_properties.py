"""Refunds' invariants over random runs (issue 33), on the whole platform started as processes (the
checkout scenario's fixtures): hypothesis generates sales of two variants, paid through the fake
provider, then partial refunds through commerce's route (with and without restock, some asking for
more than is left) mixed with redeliveries: the payment.refunded and inventory.returned records
produced on the broker again as they were, and payment's webhook deliveries of the refunds to
commerce sent again (the operator's redelivery: the delivery made due once more, for the sweep).
After each run, once every consumer has caught up with the end of those topics:

- cash: the cash account's balance moved by what was paid less what was refunded, and payment's
  refundedAmount is the sum of the refunds that succeeded;
- stock: on hand moved by the restocked units less the sold ones, per variant;
- books: every new voucher balanced, the trial balance's debits equal its credits;
- once: one REFUND voucher per refund, one cost-back voucher per refund with restocked goods, one
  RETURN tracking row per restocked line, whatever was delivered twice.

One shop serves every run (a shop is a minute of change streams); each run checks its own deltas.
Bounded: 15 runs, no deadline (each is a sale and a few refunds across ten services)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from apps.payment.fake_provider import FakeProvider
from tests.checkout.platform import Api, Platform, _registered_groups, new_seller, running_platform, wait_for
from tests.checkout.test_refund_scenario import (
    PAYMENT,
    REFUND_KIND,
    RETURNED_COST_KIND,
    TwoVariantShop,
    every,
    open_two_variant_shop,
    order_of,
    pay,
    payment_refunds,
    place,
    receive,
    refund,
    refunded_share,
)
from tests.checkout.test_scenario import DEADLINE, FINANCE, INVENTORY, results, stock_of
from tests.support.broker import BROKER, committed_offsets, read_topic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the platform, a shop and fifteen runs
PORTS = range(19600, 19650)  # this module's platform
STOCK = 200  # more of each variant than every run sells
REFUNDED_TOPIC, RETURNED_TOPIC = "payment.refunded", "inventory.returned"


@pytest.fixture(scope="module")
def platform():
    # The sweep of due webhook deliveries every second: a redelivery goes out at once. A refund's
    # webhook that reaches commerce before it recorded payment's synchronous answer is refused (409
    # REFUND_NOT_YET_RECORDED) and tried again: after a second here rather than thirty.
    with running_platform(ports=PORTS, PAYMENT_SCHEDULER_INTERVAL_SECONDS="1", PAYMENT_WEBHOOK_RETRY_BASE_SECONDS="1") as started:
        yield started


@pytest.fixture(scope="module")
def seller(platform) -> Api:
    return new_seller(platform)


@pytest.fixture(scope="module")
def shop(platform, seller, provider) -> TwoVariantShop:
    opened = open_two_variant_shop(platform, seller, provider)
    receive(seller, opened.shop, opened.shop.item_id, STOCK, 600)
    receive(seller, opened.shop, opened.second_item_id, STOCK, 200)
    return opened


@pytest.fixture(scope="module")
def refund_groups(platform) -> dict[str, set[str]]:
    """The platform's consumer groups reading payment.refunded or inventory.returned, with those topics."""
    prefix = platform.env["KAFKA_TOPIC_PREFIX"]
    wanted = {prefix + REFUNDED_TOPIC, prefix + RETURNED_TOPIC}
    groups = {group: topics & wanted for group, topics in _registered_groups(platform).items() if topics & wanted}
    assert {topic for topics in groups.values() for topic in topics} == wanted, groups  # inventory and finance read them
    return groups


@dataclass
class Rig:
    platform: Platform
    api: Api
    provider: FakeProvider
    shop: TwoVariantShop
    groups: dict[str, set[str]]
    producer: KafkaProducer


@pytest.fixture(scope="module")
def rig(platform, seller, provider, shop, refund_groups):
    producer = KafkaProducer(bootstrap_servers=BROKER, acks="all")
    yield Rig(platform, seller, provider, shop, refund_groups, producer)
    producer.close()


@dataclass
class Snapshot:
    cash: int
    on_hand: tuple[int, int]
    voucher_ids: frozenset[str]
    refund_vouchers: int
    cost_vouchers: int


def snapshot(api: Api, shop: TwoVariantShop) -> Snapshot:
    listed = every(api, f"{FINANCE}/vouchers", merchantId=shop.shop.merchant_id)
    return Snapshot(
        cash=cash_balance(api, shop),
        on_hand=(stock_of(api, shop.shop.item_id)[0], stock_of(api, shop.second_item_id)[0]),
        voucher_ids=frozenset(v["id"] for v in listed),
        refund_vouchers=sum(v["kind"] == REFUND_KIND for v in listed),
        cost_vouchers=sum(v["kind"] == RETURNED_COST_KIND for v in listed),
    )


def cash_balance(api: Api, shop: TwoVariantShop) -> int:
    (cash,) = [
        a
        for a in results(api, f"{FINANCE}/accounts", merchantId=shop.shop.merchant_id, systemRole="CASH")
        if a["id"] == shop.shop.cash_account_id
    ]
    return cash["balance"]


@dataclass
class Expected:
    """What the run should have done, as the model of the interface computes it."""

    paid: int = 0
    refunded: int = 0
    sold: list[int] = field(default_factory=lambda: [0, 0])
    restocked: list[int] = field(default_factory=lambda: [0, 0])
    refunds: list[dict] = field(default_factory=list)  # the accepted returns, as commerce answered them
    restocking_refunds: int = 0


# A run: the quantities sold of the two variants (the second may be absent), then steps: each a
# refund (which sold line, how many, restocked or not), followed by redeliveries of what it caused.
sales = st.tuples(st.integers(1, 3), st.integers(0, 3))
refund_step = st.tuples(st.integers(0, 1), st.integers(1, 2), st.booleans())
redeliveries = st.lists(st.sampled_from(["redeliver-refunded", "redeliver-returned", "redeliver-webhooks"]), max_size=2)
steps = st.lists(st.tuples(refund_step, redeliveries), min_size=1, max_size=3)


# No shrinking: each example is seconds of a live platform; a failure reports the example as generated.
@settings(
    max_examples=15,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(sold=sales, steps=steps)
def test_refunds_keep_cash_stock_and_books_whatever_is_redelivered(rig, sold, steps):
    api, shop, provider = rig.api, rig.shop, rig.provider
    before = snapshot(api, shop)
    variants = [(shop.shop.variant_id, sold[0]), (shop.second_variant_id, sold[1])]
    order = pay(api, provider, place(api, shop.shop, [(variant, quantity) for variant, quantity in variants if quantity]))
    lines = {line["variantId"]: line for line in order["lines"]}
    expected = Expected(paid=order["grossAmount"], sold=[sold[0], sold[1]])
    left = {variant: quantity for variant, quantity in variants if quantity}
    taken = {variant: 0 for variant, _ in variants}

    sold_variants = [variant for variant, quantity in variants if quantity]
    for (index, quantity, restock), again in steps:
        variant = sold_variants[index % len(sold_variants)]
        position, line = [v for v, _ in variants].index(variant), lines[variant]
        answer = refund(
            api, order["id"], [{"lineId": line["lineId"], "quantity": quantity, "restock": restock}], expect=(200, 201, 400, 409)
        )
        if quantity > left[variant]:
            # More than the line sold is a bad request; more than earlier refunds left of it (or anything of
            # an order with nothing left, REFUNDED) conflicts with what was refunded.
            beyond_sale = any(left.values()) and quantity > dict(variants)[variant]
            refusal = (400, "REFUND_LINE_QUANTITY_EXCEEDED") if beyond_sale else (409, "REFUND_EXCEEDS_REFUNDABLE")
            assert (answer.status_code, answer.json()["code"]) == refusal, answer.text
            event("a refund of more than is left refused")
        else:
            assert answer.status_code in (200, 201), answer.text
            expected.refunded += refunded_share(line, "grossAmount", taken[variant], taken[variant] + quantity)
            left[variant] -= quantity
            taken[variant] += quantity
            if restock:
                expected.restocked[position] += quantity
                expected.restocking_refunds += 1
            expected.refunds.append({"return": answer.json(), "restock": restock, "quantity": quantity})
            event("a refund with restock" if restock else "a refund without restock")
            wait_for(lambda: settled(api, order["id"]), timeout=DEADLINE, message="the return settled")
        for kind in again:
            redeliver(kind, rig, order, expected)
            event(f"{kind} after a refund" if expected.refunds else kind)

    # The effects expected arrive (or the deadline passes: the assertions below then say what differs),
    # then every redelivered message is consumed, then nothing may have moved further.
    eventually(lambda: reached(api, shop, before, expected), timeout=DEADLINE)
    settle(rig.platform, rig.groups)
    after = snapshot(api, shop)
    # cash = settled - refunded, at finance and at payment
    assert after.cash - before.cash == expected.paid - expected.refunded
    transaction = api.get(f"{PAYMENT}/transactions/{order['paymentTransactionId']}")
    refunds = payment_refunds(api, order["paymentTransactionId"])
    assert [r["status"] for r in refunds] == ["SUCCEEDED"] * len(expected.refunds), refunds
    assert transaction["refundedAmount"] == sum(r["amount"] for r in refunds) == expected.refunded
    fully = expected.refunded == order["grossAmount"]
    assert transaction["status"] == ("REFUNDED" if fully else "PARTIALLY_REFUNDED" if refunds else "SETTLED"), transaction
    final = order_of(api, order["id"])
    assert final["status"] == ("REFUNDED" if fully else "PARTIALLY_REFUNDED" if refunds else "PAID"), final
    # commerce's own account of it: each return applied once, whatever webhook came twice
    assert final["refundedAmount"] == expected.refunded, final
    assert sorted((r["id"], r["status"]) for r in final["returns"]) == sorted((r["return"]["id"], "SUCCEEDED") for r in expected.refunds)
    # on hand = received - sold + restocked
    assert [a - b for a, b in zip(after.on_hand, before.on_hand, strict=True)] == [
        r - s for r, s in zip(expected.restocked, expected.sold, strict=True)
    ]
    # every voucher balanced
    for voucher_id in after.voucher_ids - before.voucher_ids:
        voucher = api.get(f"{FINANCE}/vouchers/{voucher_id}")
        assert sum(line["debit"] for line in voucher["lines"]) == sum(line["credit"] for line in voucher["lines"]), voucher
    trial = api.get(f"{FINANCE}/reports/trial-balance", merchantId=shop.shop.merchant_id)
    assert all(total["debit"] == total["credit"] for total in trial["totals"]), trial
    # every refund's effect once
    assert after.refund_vouchers - before.refund_vouchers == len(expected.refunds)
    assert after.cost_vouchers - before.cost_vouchers == expected.restocking_refunds
    for each in refunds:
        restocked = [line for line in each["lines"] if line["restock"]]
        returned = results(api, f"{INVENTORY}/tracking", operation="RETURN", referenceType="REFUND", referenceId=each["id"])
        assert sorted((row["referenceLine"], row["delta"]) for row in returned) == sorted(
            (line["lineId"], line["quantity"]) for line in restocked
        )
        posted = results(api, f"{FINANCE}/vouchers", merchantId=shop.shop.merchant_id, kind=REFUND_KIND, sourceId=each["id"])
        assert len(posted) == 1, posted
        cost_back = results(
            api,
            f"{FINANCE}/vouchers",
            merchantId=shop.shop.merchant_id,
            kind=RETURNED_COST_KIND,
            sourceId=f"{each['id']}/{each['currency']}",
        )
        assert len(cost_back) == (1 if restocked else 0), cost_back
    # nothing parked: every message, redelivered or not, was handled
    for topic in (REFUNDED_TOPIC, RETURNED_TOPIC):
        assert read_topic(rig.platform.env["KAFKA_TOPIC_PREFIX"] + topic + ".DLQ", expected=None) == []


def reached(api: Api, shop: TwoVariantShop, before: Snapshot, expected: Expected) -> bool:
    now = snapshot(api, shop)
    return (
        now.cash - before.cash == expected.paid - expected.refunded
        and [a - b for a, b in zip(now.on_hand, before.on_hand, strict=True)]
        == [r - s for r, s in zip(expected.restocked, expected.sold, strict=True)]
        and now.refund_vouchers - before.refund_vouchers == len(expected.refunds)
        and now.cost_vouchers - before.cost_vouchers == expected.restocking_refunds
    )


def eventually(condition, *, timeout: float) -> bool:
    """Whether `condition` holds within `timeout` seconds (polled; no failure when it does not)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def settled(api: Api, order_id: str) -> bool:
    return all(r["status"] != "PENDING" for r in order_of(api, order_id)["returns"])


def redeliver(kind: str, rig: Rig, order: dict, expected: Expected) -> None:
    """Deliver this order's refund messages again, once the originals are all there: the records on
    the broker produced once more as they are (key, value, headers), or payment's webhook deliveries
    of its refunds, once sent, made due again (what an operator's redelivery does)."""
    if kind == "redeliver-webhooks":
        with rig.platform.connect() as connection:
            mine = "event_type = 'refund.succeeded' AND payload -> 'transaction' ->> 'id' = %s"
            wait_for(
                lambda: (
                    connection.execute(
                        f"SELECT count(*) FILTER (WHERE status = 'SUCCEEDED'), count(*) FROM payment.webhook_delivery WHERE {mine}",
                        [order["paymentTransactionId"]],
                    ).fetchone()
                    == (len(expected.refunds),) * 2
                ),
                timeout=DEADLINE,
                message="the refunds' webhook deliveries sent",
            )
            again = connection.execute(
                f"UPDATE payment.webhook_delivery SET status = 'PENDING', next_attempt_at = now() WHERE {mine}",
                [order["paymentTransactionId"]],
            ).rowcount
        assert again == len(expected.refunds)
        return
    refunded = kind == "redeliver-refunded"
    topic = rig.platform.env["KAFKA_TOPIC_PREFIX"] + (REFUNDED_TOPIC if refunded else RETURNED_TOPIC)

    minimum = len(expected.refunds) if refunded else expected.restocking_refunds  # one message per (restocking) refund

    def originals() -> list | None:
        records = [record for record in read_topic(topic, expected=None) if about(json.loads(record.value), order)]
        return records if len(records) >= minimum else None

    records = wait_for(originals, timeout=DEADLINE, message=f"the order's records on {topic}") if minimum else originals()
    for record in records:
        rig.producer.send(topic, key=record.key, value=record.value, headers=list(record.headers)).get(timeout=10)


def about(value: dict, order: dict) -> bool:
    """Whether a payment.refunded or inventory.returned message is about this order."""
    return value.get("transaction", {}).get("id") == order["paymentTransactionId"] or value.get("orderId") == order["placementReference"]


def settle(platform: Platform, groups: dict[str, set[str]]) -> None:
    """Every group reading the refund topics committed up to their end, and no webhook delivery due."""
    reader = KafkaConsumer(bootstrap_servers=BROKER, enable_auto_commit=False)
    try:

        def caught_up() -> bool:
            for group, topics in groups.items():
                for topic in topics:
                    partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic) or ()]
                    ends = reader.end_offsets(partitions)
                    committed = committed_offsets(group, topic)
                    if any((committed.get(tp.partition) or 0) < end for tp, end in ends.items()):
                        return False
            return True

        wait_for(caught_up, timeout=DEADLINE, interval=0.5, message="the refund topics' consumers caught up")
    finally:
        reader.close()
    with platform.connect() as connection:
        wait_for(
            lambda: connection.execute("SELECT count(*) FROM payment.webhook_delivery WHERE status = 'PENDING'").fetchone()[0] == 0,
            timeout=DEADLINE,
            message="payment's webhook deliveries sent",
        )
