"""The MERCHANT and PRODUCT_VARIANT change streams (spec 6.2) on the real broker, through the
kernel's runner in inventory's consumer group: a merchant gets one default location
(ensureDefaultLocation: idempotent, restored when soft-deleted, never duplicated by replays or
concurrent calls), a variant one item (SKU, name, status; a deleted variant deactivates it). The
last test drives commerce's real CDC relay."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.conf import settings
from django.db import connections

from apps.inventory import services
from apps.inventory.consumers import MERCHANT_CONSUMER, PAYMENT_CONSUMER, VARIANT_CONSUMER
from apps.inventory.models import Item, Location, ProcessedMessage
from merchant_platform.cdc import Capture
from merchant_platform.cdc.envelope import build_envelope
from merchant_platform.messaging.registry import registered_consumers
from tests.inventory.conftest import new_id
from tests.support.broker import produce, read_topic
from tests.support.cdc import commerce_relay
from tests.support.consumers import RunningConsumer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)

SOURCE = {
    "version": "merchant-platform-cdc-1",
    "connector": "postgresql",
    "name": "commerce",
    "db": "merchant_platform",
    "schema": "allocation",
}


def change(table: str, op: str, row: dict, *, lsn: int, before: dict | None = None) -> dict:
    source = {
        **SOURCE,
        "table": table,
        "lsn": lsn,
        "ts_ms": 1,
        "snapshot": "false",
        "txId": lsn,
        "sequence": f'[null,"{lsn}"]',
        "xmin": None,
    }
    return build_envelope(op=op, before=before, after=None if op == "d" else row, source=source, ts_ms=1)


# The columns every commerce row carries (docs/events.md, Commerce change streams).
ROW = {"created_at": "2026-11-25T13:20:27.601234Z", "updated_at": "2026-11-25T13:20:27.601234Z", "deleted_at": None, "created_by": 42}


def merchant_row(merchant_id: int, **fields) -> dict:
    return {
        **ROW,
        "id": merchant_id,
        "name": "Shop",
        "slug": f"s-{merchant_id}",
        "legal_name": "",
        "default_currency": "EUR",
        "country": "FR",
        "timezone": "Europe/Paris",
        "status": "ACTIVE",
        **fields,
    }


def variant_row(variant_id: int, merchant_id: int, **fields) -> dict:
    return {
        **ROW,
        "id": variant_id,
        "merchant_id": merchant_id,
        "primary_product_id": 77,
        "sku": "LAMP-1",
        "name": "Lamp",
        "price_amount": 1250,
        "currency": "EUR",
        "unit_cost_amount": 700,
        "attributes": "{}",
        "status": "ACTIVE",
        **fields,
    }


def test_consumers_are_registered_in_the_spec_group():
    specs = {spec.name: spec for spec in registered_consumers(names={MERCHANT_CONSUMER, VARIANT_CONSUMER, PAYMENT_CONSUMER})}
    # The broker names carry KAFKA_TOPIC_PREFIX and KAFKA_CONSUMER_GROUP_SUFFIX (empty in
    # production, set by isolated test runs).
    prefix, suffix = settings.KAFKA_TOPIC_PREFIX, settings.KAFKA_CONSUMER_GROUP_SUFFIX
    assert specs[MERCHANT_CONSUMER].topics == (f"{prefix}cdc.commerce.merchant",)
    assert specs[VARIANT_CONSUMER].topics == (f"{prefix}cdc.commerce.product_variant",)
    assert specs[PAYMENT_CONSUMER].topics == (f"{prefix}payment.success",)
    assert {spec.group_id for spec in specs.values()} == {f"SVC-00050-INVENTORY_CONSUMER_GROUP{suffix}"}
    assert all(spec.alias == "inventory" and spec.idempotent for spec in specs.values())


def test_merchant_stream_keeps_one_default_location_across_replays_and_soft_deletes(make_topic, raw_producer):
    topic, merchant = make_topic(), new_id()
    key = lambda value: f'{{"id": {merchant}}}'  # noqa: E731
    runner = RunningConsumer.registered(MERCHANT_CONSUMER, topic)
    try:
        produce(raw_producer, topic, [change("merchant", "c", merchant_row(merchant), lsn=10)], key=key)
        wait_for(lambda: Location.objects.filter(merchant_id=merchant).exists(), message="the default location")
        first = Location.objects.get(merchant_id=merchant)
        assert (first.is_default, first.name) == (True, "Default")
        # A replay (snapshot row, same change again) and an update: still one location.
        produce(raw_producer, topic, [change("merchant", "r", merchant_row(merchant), lsn=11)], key=key)
        produce(raw_producer, topic, [change("merchant", "c", merchant_row(merchant), lsn=10)], key=key)
        produce(raw_producer, topic, [change("merchant", "u", merchant_row(merchant, name="New"), lsn=12)], key=key)
        wait_for(lambda: ProcessedMessage.objects.filter(consumer=MERCHANT_CONSUMER).count() >= 3, message="the replays")
        # An operator soft-deletes the default location; the merchant's next change restores it.
        services.location_delete(location_id=first.id)
        assert not Location.objects.filter(merchant_id=merchant).exists()
        produce(raw_producer, topic, [change("merchant", "u", merchant_row(merchant, name="Newer"), lsn=13)], key=key)
        wait_for(lambda: Location.objects.filter(merchant_id=merchant).exists(), message="the restored location")
        # A deleted merchant gets nothing new (and a tombstone is skipped).
        gone = new_id()
        produce(raw_producer, topic, [change("merchant", "u", merchant_row(gone, deleted_at="2026-01-01T00:00:00Z"), lsn=14)])
        produce(raw_producer, topic, [b"null"])
        wait_for(lambda: ProcessedMessage.objects.filter(consumer=MERCHANT_CONSUMER).count() >= 5, message="the last messages")
    finally:
        runner.finish()
    assert list(Location.all_objects.filter(merchant_id=merchant).values_list("id", "deleted_at")) == [(first.id, None)]
    assert not Location.all_objects.filter(merchant_id=gone).exists()


def test_concurrent_ensure_default_location_creates_one_row():
    merchant, results, errors = new_id(), [], []
    barrier = threading.Barrier(8)

    def call():
        try:
            barrier.wait()
            results.append(services.location_ensure_default(merchant_id=merchant).id)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(set(results)) == 1
    assert Location.all_objects.filter(merchant_id=merchant).count() == 1


def test_variant_stream_creates_updates_and_deactivates_items(make_topic, raw_producer):
    topic, merchant, variant = make_topic(), new_id(), new_id()
    key = lambda value: f'{{"id": {variant}}}'  # noqa: E731
    runner = RunningConsumer.registered(VARIANT_CONSUMER, topic)
    try:
        produce(raw_producer, topic, [change("product_variant", "c", variant_row(variant, merchant), lsn=20)], key=key)
        wait_for(lambda: Item.objects.filter(variant_id=variant).exists(), message="the item")
        item = Item.objects.get(variant_id=variant)
        assert (item.merchant_id, item.sku, item.name, item.status, item.unit_cost_amount, item.currency, item.allow_oversell) == (
            merchant,
            "LAMP-1",
            "Lamp",
            "ACTIVE",
            700,
            "EUR",
            False,
        )
        produce(raw_producer, topic, [change("product_variant", "r", variant_row(variant, merchant), lsn=21)], key=key)
        produce(
            raw_producer, topic, [change("product_variant", "u", variant_row(variant, merchant, sku="LAMP-2", name="Big"), lsn=22)], key=key
        )
        wait_for(lambda: Item.objects.filter(variant_id=variant, sku="LAMP-2").exists(), message="the update")
        deleted = variant_row(variant, merchant, sku="LAMP-2", name="Big", deleted_at="2026-11-25T13:20:27.601234Z")
        produce(raw_producer, topic, [change("product_variant", "u", deleted, lsn=23)], key=key)
        wait_for(lambda: Item.objects.filter(variant_id=variant, status="INACTIVE").exists(), message="the deactivation")
        produce(raw_producer, topic, [change("product_variant", "u", variant_row(variant, merchant, sku="LAMP-2"), lsn=24)], key=key)
        wait_for(lambda: Item.objects.filter(variant_id=variant, status="ACTIVE").exists(), message="the restore")
        produce(raw_producer, topic, [change("product_variant", "d", None, before=variant_row(variant, merchant, sku="LAMP-2"), lsn=25)])
        wait_for(lambda: Item.objects.filter(variant_id=variant, status="INACTIVE").exists(), message="the hard delete")
    finally:
        runner.finish()
    assert Item.all_objects.filter(variant_id=variant).count() == 1


def test_a_variant_event_without_its_columns_is_parked_at_once(make_topic, raw_producer):
    topic = make_topic()
    runner = RunningConsumer.registered(VARIANT_CONSUMER, topic)
    try:
        produce(raw_producer, topic, [change("product_variant", "c", {"id": 5}, lsn=30), {"not": "an envelope"}])
        parked = read_topic(f"{topic}.DLQ", expected=2, timeout=30)
    finally:
        runner.finish()
    assert len(parked) == 2


def test_a_variant_event_moving_a_known_item_to_another_merchant_is_parked_at_once(make_topic, raw_producer):
    """A record's merchant never changes through an event: a change naming a known variant under
    another merchant changes nothing and is parked on the first delivery, with the reason."""
    topic, merchant, other, variant = make_topic(), new_id(), new_id(), new_id()
    item = services.item_sync(variant_id=variant, merchant_id=merchant, sku="LAMP-1", name="Lamp", currency="EUR", unit_cost_amount=700)
    runner = RunningConsumer.registered(VARIANT_CONSUMER, topic)
    try:
        hostile = variant_row(variant, other, sku="HIJACK-1", name="Hijacked", unit_cost_amount=1)
        produce(raw_producer, topic, [change("product_variant", "u", hostile, lsn=40)], key=lambda value: f'{{"id": {variant}}}')
        parked = read_topic(f"{topic}.DLQ", expected=1, timeout=30)
    finally:
        runner.finish()
    reason = dict(parked[0].headers)["dlq.error"].decode()
    assert "another merchant" in reason and str(variant) in reason
    assert dict(parked[0].headers)["dlq.attempts"] == b"1"
    kept = Item.all_objects.get(variant_id=variant)
    assert (kept.id, kept.merchant_id, kept.sku, kept.name, kept.updated_at) == (item.id, merchant, "LAMP-1", "Lamp", item.updated_at)
    assert Item.all_objects.filter(variant_id=variant).count() == 1


def test_commerce_merchant_and_variant_through_the_real_relay_become_location_and_item(make_topic, raw_producer, slot):
    """commerce writes -> WAL -> CDC relay -> broker -> inventory's consumers."""
    from apps.commerce import services as commerce

    merchants, variants = make_topic(prefix="merchant"), make_topic(prefix="variant")
    relay = commerce_relay(
        slot, [Capture(topic=merchants, model="commerce.Merchant"), Capture(topic=variants, model="commerce.ProductVariant")]
    )
    relay.setup()
    merchant = commerce.merchant_create(name="Shop", slug=f"shop-{uuid.uuid4().hex[:8]}", default_currency="EUR", country="FR")
    product = commerce.product_create(merchant_id=merchant.id, name="Lamp")
    variant = commerce.variant_create(product_id=product.id, sku="LAMP-9", price_amount=1250, currency="EUR", unit_cost_amount=640)
    commerce.variant_delete(variant_id=variant.id)
    published = 0
    for _ in range(50):
        published += relay.poll_once()
        if published >= 3:
            break
    relay.close()
    on_merchants, on_variants = (
        RunningConsumer.registered(MERCHANT_CONSUMER, merchants),
        RunningConsumer.registered(VARIANT_CONSUMER, variants),
    )
    try:
        wait_for(lambda: Location.objects.filter(merchant_id=merchant.id, is_default=True).exists(), message="the location")
        wait_for(lambda: Item.objects.filter(variant_id=variant.id, status="INACTIVE").exists(), message="the retired item")
    finally:
        on_merchants.finish()
        on_variants.finish()
    item = Item.objects.get(variant_id=variant.id)
    assert (item.merchant_id, item.product_id, item.sku, item.unit_cost_amount) == (merchant.id, product.id, "LAMP-9", 640)
