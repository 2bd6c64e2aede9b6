"""Commerce's change streams through the real CDC relay, PostgreSQL WAL and broker: the captured
tables and topics, and the exact message shapes docs/events.md promises to inventory, finance and
taxation (insert, update, soft delete and restore, in order, keyed by the row id)."""

from __future__ import annotations

import pytest

from apps.commerce import services
from apps.commerce.cdc import CAPTURES
from merchant_platform.cdc import Capture, parse_change_event, parse_change_key
from merchant_platform.cdc.captures import service_captures
from merchant_platform.messaging.topics import CHANGE_STREAMS
from merchant_platform.registry import get_service
from tests.commerce.conftest import new_merchant, new_product, new_variant
from tests.support.broker import read_topic
from tests.support.cdc import commerce_relay

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)

COMMON = {"id", "created_at", "updated_at", "deleted_at", "created_by"}
# The columns each stream carries (docs/events.md): the contract the consumers are built against.
MERCHANT_COLUMNS = COMMON | {"name", "slug", "legal_name", "default_currency", "country", "timezone", "status"}
PRODUCT_COLUMNS = COMMON | {"merchant_id", "name", "description", "status", "tax_group_id"}
VARIANT_COLUMNS = COMMON | {
    "merchant_id",
    "primary_product_id",
    "sku",
    "name",
    "price_amount",
    "currency",
    "unit_cost_amount",
    "attributes",
    "status",
}


def test_commerce_declares_the_three_streams_on_the_catalogue_topics():
    captures = service_captures(get_service("commerce"))
    assert [(c.model, c.topic) for c in captures] == [
        ("commerce.Merchant", CHANGE_STREAMS["MERCHANT"].name),
        ("commerce.Product", CHANGE_STREAMS["PRODUCT"].name),
        ("commerce.ProductVariant", CHANGE_STREAMS["PRODUCT_VARIANT"].name),
    ]
    assert [c.table_name() for c in captures] == ["merchant", "product", "product_variant"]


def _events(topic: str, expected: int) -> list[tuple[dict, object]]:
    return [(parse_change_key(r.key), parse_change_event(r.value)) for r in read_topic(topic, expected=expected)]


def test_insert_update_soft_delete_and_restore_reach_the_streams_in_order(make_topic, slot):
    # The declared captures, each sent to a topic of this test (one partition: publish order is read order).
    topics = {c.model: make_topic(prefix=c.model.split(".")[1].lower(), partitions=1) for c in CAPTURES}
    relay = commerce_relay(slot, [Capture(topic=topics[c.model], model=c.model) for c in CAPTURES])
    relay.setup()
    merchant = new_merchant(created_by=42, legal_name="Shop SARL")
    services.merchant_update(merchant_id=merchant.id, status="SUSPENDED")
    product = new_product(merchant.id, tax_group_id=9001)
    variant = new_variant(product.id, sku="LAMP-1", unit_cost_amount=700, attributes={"colour": "red"})
    services.variant_update(variant_id=variant.id, price_amount=1500)
    services.product_delete(product_id=product.id)  # soft: the variant goes with it
    services.product_restore(product_id=product.id)
    published = 0
    for _ in range(50):
        published += relay.poll_once()
        if published >= 8:
            break
    relay.close()
    assert published == 8

    merchants = _events(topics["commerce.Merchant"], 2)
    assert [key for key, _ in merchants] == [{"id": merchant.id}] * 2
    created, suspended = (event for _, event in merchants)
    assert (created.op, suspended.op) == ("c", "u")
    assert set(created.after) == MERCHANT_COLUMNS
    assert {k: created.after[k] for k in ("id", "slug", "default_currency", "country", "status", "created_by", "deleted_at")} == {
        "id": merchant.id,
        "slug": merchant.slug,
        "default_currency": "EUR",
        "country": "FR",
        "status": "ACTIVE",
        "created_by": 42,
        "deleted_at": None,
    }
    assert suspended.before["status"] == "ACTIVE" and suspended.after["status"] == "SUSPENDED"
    assert (created.source["schema"], created.source["table"]) == ("allocation", "merchant")

    products = _events(topics["commerce.Product"], 3)
    assert [key for key, _ in products] == [{"id": product.id}] * 3
    assert [event.op for _, event in products] == ["c", "u", "u"]
    inserted, deleted, restored = (event for _, event in products)
    assert set(inserted.after) == PRODUCT_COLUMNS
    assert (inserted.after["merchant_id"], inserted.after["tax_group_id"], inserted.after["status"]) == (merchant.id, 9001, "DRAFT")
    # A soft delete is an update that sets deleted_at (an ISO-8601 UTC string); a restore clears it.
    assert inserted.after["deleted_at"] is None and deleted.after["deleted_at"].endswith("Z") and restored.after["deleted_at"] is None

    variants = _events(topics["commerce.ProductVariant"], 3)
    assert [key for key, _ in variants] == [{"id": variant.id}] * 3
    assert [event.op for _, event in variants] == ["c", "u", "u"]
    made, repriced, removed = (event for _, event in variants)
    assert set(made.after) == VARIANT_COLUMNS
    assert {k: made.after[k] for k in ("merchant_id", "primary_product_id", "sku", "price_amount", "currency", "unit_cost_amount")} == {
        "merchant_id": merchant.id,
        "primary_product_id": product.id,
        "sku": "LAMP-1",
        "price_amount": 1250,
        "currency": "EUR",
        "unit_cost_amount": 700,
    }
    assert made.after["attributes"] == '{"colour": "red"}'  # jsonb travels as a JSON string (Debezium)
    assert (repriced.before["price_amount"], repriced.after["price_amount"]) == (1250, 1500)
    assert removed.after["deleted_at"] is not None
