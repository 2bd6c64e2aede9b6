"""Target `inventory`: the payment.success consumer deducting orders (issue 14, performance).

(a) inventory's registered payment.success batch handler under the consumer runner (inventory's
    alias, its processed-message table), orders of 3 lines spread over 1,000 items;
(b) the same with every order on one hot item, whose stock runs out part-way: the rate, and the
    check that nothing was oversold (on hand + deducted = initial, deducted + blocked = asked);
(c) the kernel's idempotent-write handler (events target (c')), measured in the same run, for
    comparison: the same runner with a one-row bulk write per message.
Target: (a) at least 1,000 orders/s. Runner figures exclude the group join: the clock runs from
the first handled message to the last.

The items (merchant BENCH_MERCHANT) are created once in the bench database and kept between runs;
each run restocks them with a tracked adjustment, so the tracking rows always sum to the stock.
"""

from __future__ import annotations

import random
import uuid

from benchmarks.events import _bench_models, _create_tables, _drop_tables, _fill, _topic, bench_runner
from benchmarks.framework import Context, produce_keyed, run_registered_consumer

BENCH_MERCHANT = 9_990_000_005
FIRST_VARIANT = 9_990_005_000_000
ITEMS = 1_000
LINES = 3
ORDERS = 10_000
HOT_ORDERS = 5_000
HOT_STOCK = 3_000  # fewer units than the hot orders ask for: part of them must be blocked
STOCK_PER_ITEM = 1_000_000
MIN_ORDER_RATE = 1_000


def bench_items() -> list:
    """The bench merchant's items (created on first use), each restocked to STOCK_PER_ITEM."""
    from apps.inventory import services
    from apps.inventory.models import Stock

    items = [
        services.item_sync(
            variant_id=FIRST_VARIANT + n, merchant_id=BENCH_MERCHANT, sku=f"BENCH-{n}", currency="EUR", unit_cost_amount=100 + n % 50
        )
        for n in range(ITEMS + 1)  # the last one is the hot item
    ]
    for item in items:
        stock = Stock.objects.filter(item_id=item.id, location__is_default=True).first()
        wanted = HOT_STOCK if item is items[-1] else STOCK_PER_ITEM
        delta = wanted - (stock.quantity_on_hand if stock else 0)
        if delta:
            services.stock_adjust(item_id=item.id, delta=delta, reason="bench restock")
    return items


def _order(order_id: str, lines: list[tuple[int, int]]) -> tuple[str, dict]:
    return order_id, _paid(order_id, lines)


def _paid(order_id: str, lines: list[tuple[int, int]]) -> dict:
    return {
        "event": "pay:attempt.success",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "source": "payment",
        "transaction": {"id": order_id, "sourceId": order_id, "status": "SETTLED"},
        "attempt": {"id": order_id, "code": order_id, "status": "302_SUCCESS", "amount": 1},
        "order": {
            "merchantId": str(BENCH_MERCHANT),
            "lines": [
                {"lineId": str(n), "variantId": str(variant), "quantity": quantity} for n, (variant, quantity) in enumerate(lines, 1)
            ],
        },
    }


def bench_deductions(ctx: Context, name: str, topic: str, count: int) -> dict:
    """inventory's registered handler under the runner, on `topic` in a fresh group."""
    from apps.inventory.consumers import PAYMENT_CONSUMER

    return run_registered_consumer(ctx, name, consumer=PAYMENT_CONSUMER, topic=topic, count=count, unit="orders/s")


def run(ctx: Context) -> list[dict]:
    ctx.django()
    from django.db import connections
    from django.db.models import Sum
    from kafka import KafkaAdminClient

    from apps.inventory.models import Note, Stock, Tracking
    from merchant_platform.messaging.config import client_options

    admin = KafkaAdminClient(**client_options("bench-admin"))
    results, topics = [], []
    run_id = uuid.uuid4().hex[:8]
    try:
        items = bench_items()
        spread, hot = items[:-1], items[-1]
        ctx.say(f"  {ITEMS} items of merchant {BENCH_MERCHANT} restocked, hot item {hot.id} at {HOT_STOCK}")
        rng = random.Random(7)
        topic = _topic(admin, "inventory-spread")
        topics.append(topic)
        produce_keyed(topic, [_order(f"b{run_id}-{n}", [(i.variant_id, 1) for i in rng.sample(spread, LINES)]) for n in range(ORDERS)])
        spread_result = bench_deductions(ctx, f"(a) payment.success, {LINES} lines over {ITEMS} items", topic, ORDERS)
        results.append(spread_result)

        hot_topic = _topic(admin, "inventory-hot")
        topics.append(hot_topic)
        produce_keyed(hot_topic, [_order(f"h{run_id}-{n}", [(hot.variant_id, 1)]) for n in range(HOT_ORDERS)])
        results.append(bench_deductions(ctx, "(b) payment.success, every order on one hot item", hot_topic, HOT_ORDERS))
        rows = Tracking.objects.filter(reference_type="SALE_ORDER", reference_id__startswith=f"h{run_id}-")
        deducted = -(rows.aggregate(total=Sum("delta"))["total"] or 0)
        blocked = rows.filter(note=Note.OVERSELL_BLOCKED).count()
        on_hand = Stock.objects.get(item_id=hot.id, location__is_default=True).quantity_on_hand
        sound = on_hand >= 0 and on_hand + deducted == HOT_STOCK and deducted + blocked == HOT_ORDERS
        results.append(
            ctx.record("check: (b) zero oversell", onHand=on_hand, deducted=deducted, blocked=blocked, value=on_hand, passed=sound)
        )

        processed_model, effect_model = _bench_models()
        _create_tables(processed_model, effect_model)
        try:
            kernel_topic = _topic(admin, "inventory-kernel")
            topics.append(kernel_topic)
            _fill(kernel_topic, ORDERS)

            def write_rows_in_bulk(clock):
                def handle(messages):
                    effect_model.objects.bulk_create([effect_model(sku=m.value["sku"], quantity=m.value["qty"]) for m in messages])
                    for _ in messages:
                        clock.tick()

                return handle

            results.append(
                bench_runner(
                    ctx,
                    "(c) kernel idempotent-write batch handler, same run",
                    kernel_topic,
                    ORDERS,
                    handler_factory=write_rows_in_bulk,
                    idempotent=True,
                    processed_model=processed_model,
                    batch=True,
                )
            )
        finally:
            _drop_tables(processed_model._meta.db_table, effect_model._meta.db_table)
    finally:
        if topics:
            admin.delete_topics(topics)
        admin.close()
        connections.close_all()
    results.append(
        ctx.record(
            f"check: (a) >= {MIN_ORDER_RATE:,} orders/s", value=round(spread_result["rate"]), passed=spread_result["rate"] >= MIN_ORDER_RATE
        )
    )
    return results
