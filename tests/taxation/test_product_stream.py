"""Commerce's product change stream on the real broker (issue 17, features 4 and 11): change events
as docs/events.md specifies them provision and deprovision; replays apply once; poison goes to the DLQ."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.conf import settings

from apps.commerce import services as commerce
from apps.taxation import consumers, services
from apps.taxation.models import ProcessedMessage, Product, TaxSet
from merchant_platform.cdc import Capture
from merchant_platform.messaging import topics
from merchant_platform.messaging.registry import registered_consumers
from tests.commerce.conftest import new_merchant, new_product
from tests.support.broker import produce, read_topic
from tests.support.cdc import commerce_relay
from tests.support.consumers import consumer_spec
from tests.support.waiting import wait_for
from tests.taxation.conftest import MERCHANT, OTHER_MERCHANT, learn_product

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)

LSN = iter(range(10_000, 10**9, 10))


def change(op: str, product_id: int, *, tax_group_id: int | None, deleted: bool = False, merchant_id: int = MERCHANT) -> dict:
    """A product change event exactly as docs/events.md ("Commerce change streams") shows them."""
    row = {
        "id": product_id,
        "created_at": "2026-11-25T13:20:27.601234Z",
        "updated_at": "2026-11-25T13:20:28.601234Z",
        "deleted_at": "2026-11-25T13:21:00.000000Z" if deleted else None,
        "created_by": 42,
        "merchant_id": merchant_id,
        "name": "Lamp",
        "description": "",
        "status": "PUBLISHED",
        "tax_group_id": tax_group_id,
    }
    lsn = next(LSN)
    return {
        "before": row if op == "d" else None,
        "after": None if op == "d" else row,
        "source": {
            "version": "merchant-platform-cdc-1",
            "connector": "postgresql",
            "name": "commerce",
            "ts_ms": 1795613227601,
            "snapshot": "false",
            "db": "merchant_platform",
            "sequence": f'[null,"{lsn}"]',
            "schema": "allocation",
            "table": "product",
            "txId": lsn,
            "lsn": lsn,
            "xmin": None,
        },
        "op": op,
        "ts_ms": 1795613227650,
        "transaction": None,
    }


@pytest.fixture
def consume(run_consumer):
    """Run the registered consumer on `topic` in a fresh group (reading from the start, since the
    tests produce before the group has joined); stopped at the end."""
    return lambda topic: run_consumer(consumer_spec(consumers.CONSUMER, topic, offset_reset="earliest"))


@pytest.fixture
def stream(make_topic, consume):
    topic = make_topic("taxation-products", partitions=1)
    consume(topic)
    return topic


def group(merchant_id: int = MERCHANT, rate: str = "10"):
    return services.tax_group_create(merchant_id=merchant_id, name="g", items=[{"name": "VAT", "rate": Decimal(rate)}])


def statuses(product_id: int) -> list[tuple[int, str]]:
    return list(TaxSet.objects.filter(product_id=product_id).order_by("id").values_list("group_id", "status"))


def test_the_registered_consumer_reads_commerces_product_stream_from_latest():
    (spec,) = [s for s in registered_consumers(services={"taxation"}) if s.name == consumers.CONSUMER]
    # With a scratch platform's prefix and suffix (KAFKA_TOPIC_PREFIX, KAFKA_CONSUMER_GROUP_SUFFIX) around the spec's names.
    assert spec.topics == (topics.PRODUCT_CHANGES.name,) == (f"{settings.KAFKA_TOPIC_PREFIX}cdc.commerce.product",)
    assert spec.offset_reset == "latest" and spec.idempotent
    suffix = settings.KAFKA_CONSUMER_GROUP_SUFFIX.replace("{consumer}", consumers.CONSUMER)
    assert spec.group_id == f"SVC-00032-TAXATION_CONSUMER_GROUP{suffix}" and spec.alias == "taxation"


def test_creates_updates_and_deletes_provision_and_deprovision(raw_producer, kafka_admin, stream):
    first, second = group(), group(rate="20")
    events = [
        change("c", 601, tax_group_id=first.id),  # created with a group: provisioned
        change("u", 601, tax_group_id=second.id),  # another group: the first set is deactivated
        change("u", 601, tax_group_id=second.id),  # a change of something else: skipped
        change("c", 602, tax_group_id=first.id),
        change("u", 602, tax_group_id=None),  # the group reference removed: deprovisioned
        change("c", 603, tax_group_id=first.id),
        change("u", 603, tax_group_id=first.id, deleted=True),  # soft delete: deprovisioned
        change("r", 604, tax_group_id=first.id),  # snapshot rows count as creations
        change("d", 604, tax_group_id=first.id),  # an operator's hard delete
        None,  # ... and its tombstone
        change("c", 605, tax_group_id=None),  # never provisioned: nothing to do
    ]
    for event in events:
        if event is None:
            raw_producer.send(stream, value=None, key=json.dumps({"id": 604}).encode()).get(timeout=10)
        else:
            produce(raw_producer, stream, [event], key=json.dumps({"id": (event["after"] or event["before"])["id"]}))
    wait_for(lambda: ProcessedMessage.objects.filter(consumer=consumers.CONSUMER).count() >= len(events) - 1, message="every change")
    assert f"{stream}.DLQ" not in kafka_admin.list_topics()  # the tombstone is not poison
    assert statuses(601) == [(first.id, "DEACTIVATED"), (second.id, "ACTIVE")]
    assert statuses(602) == [(first.id, "DEACTIVATED")]
    assert statuses(603) == [(first.id, "DEACTIVATED")]
    assert statuses(604) == [(first.id, "DEACTIVATED")]
    assert statuses(605) == []
    assert set(TaxSet.objects.values_list("source", flat=True)) == {"stream"}


def test_a_replayed_change_provisions_once(raw_producer, stream):
    target = group()
    event = change("c", 611, tax_group_id=target.id)
    produce(raw_producer, stream, [event, event, change("u", 612, tax_group_id=target.id)])
    wait_for(lambda: TaxSet.objects.filter(product_id=612).exists(), message="the change after the replay")
    assert statuses(611) == [(target.id, "ACTIVE")]
    assert ProcessedMessage.objects.filter(consumer=consumers.CONSUMER).count() == 2  # the replay was skipped


def test_poison_changes_are_parked_on_the_dlq_and_later_ones_flow(raw_producer, stream):
    theirs, expired = group(OTHER_MERCHANT), group()
    services.tax_group_update(tax_group_id=expired.id, items=[{"name": "VAT", "rate": Decimal(5), "valid_to": "2000-01-01"}])
    ours = group()
    poison = [
        b"{not json",
        {"op": "x"},
        change("c", 621, tax_group_id=987654321),  # no such group
        change("c", 622, tax_group_id=theirs.id),  # another merchant's group
        change("c", 623, tax_group_id=expired.id),  # no items in effect
    ]
    produce(raw_producer, stream, [*poison, change("c", 624, tax_group_id=ours.id)])
    parked = read_topic(f"{stream}.DLQ", expected=len(poison), timeout=30)
    wait_for(lambda: TaxSet.objects.filter(product_id=624).exists(), message="the good change")
    assert len(parked) == len(poison)
    errors = [dict(record.headers)["dlq.error"].decode() for record in parked]
    assert "No tax group has this id." in errors[2]
    assert "is a tax group of another merchant than the product's" in errors[3]
    assert "no items" in errors[4]
    assert not TaxSet.objects.filter(product_id__in=[621, 622, 623]).exists()


def test_commerce_products_through_the_real_cdc_relay_provision_and_deprovision(make_topic, consume, slot):
    """Commerce's own writes, captured from PostgreSQL's WAL by the CDC relay and consumed from the
    broker: the contract of docs/events.md end to end."""
    topic = make_topic("taxation-cdc-products", partitions=1)
    relay = commerce_relay(slot, [Capture(topic=topic, model="commerce.Product")])
    relay.setup()
    consume(topic)
    merchant = new_merchant()
    target = group(merchant.id)
    lamp = new_product(merchant.id, tax_group_id=target.id)  # created with a group
    vase = new_product(merchant.id)  # created without one
    commerce.product_update(product_id=vase.id, tax_group_id=target.id)  # given one later
    commerce.product_update(product_id=lamp.id, tax_group_id=None)  # its group removed
    commerce.product_delete(product_id=vase.id)  # soft-deleted
    published = 0
    for _ in range(50):
        published += relay.poll_once()
        if published >= 5:
            break
    relay.close()
    assert published == 5
    wait_for(lambda: ProcessedMessage.objects.filter(consumer=consumers.CONSUMER).count() == 5, message="the five changes")
    assert statuses(lamp.id) == [(target.id, "DEACTIVATED")]
    assert statuses(vase.id) == [(target.id, "DEACTIVATED")]
    assert TaxSet.objects.filter(product_id=vase.id).get().merchant_id == merchant.id


def parked_at_once(records) -> list[str]:
    """The `dlq.error` of each parked record, checking it was parked on its first attempt (no retry
    can make a foreign record the event's)."""
    headers = [dict((name, value.decode()) for name, value in record.headers) for record in records]
    assert [(h["dlq.attempts"], h["dlq.errorClass"].rsplit(".", 1)[-1]) for h in headers] == [("1", "UndecodableMessage")] * len(headers)
    return [h["dlq.error"] for h in headers]


def test_a_change_naming_a_known_product_under_another_merchant_is_parked_at_once_and_changes_nothing(raw_producer, stream):
    ours, theirs = group(), group(OTHER_MERCHANT)
    services.product_apply(product_id=631, merchant_id=MERCHANT, tax_group_id=ours.id)  # learned from the stream
    learn_product(632)  # known, never provisioned
    services.tax_set_provision(product_id=633, tax_group_id=ours.id, merchant_id=MERCHANT)  # known only by its tax set
    hostile = [
        change("u", 631, tax_group_id=theirs.id, merchant_id=OTHER_MERCHANT),  # moved to B with B's group
        change("u", 632, tax_group_id=None, deleted=True, merchant_id=OTHER_MERCHANT),  # "deleted" under B
        change("u", 633, tax_group_id=theirs.id, merchant_id=OTHER_MERCHANT),
    ]
    produce(raw_producer, stream, [*hostile, change("c", 634, tax_group_id=ours.id)])
    errors = parked_at_once(read_topic(f"{stream}.DLQ", expected=len(hostile), timeout=30))
    wait_for(lambda: TaxSet.objects.filter(product_id=634).exists(), message="the good change")
    assert len(errors) == len(hostile)
    for product_id, error in zip((631, 632, 633), errors, strict=True):
        assert f"product {product_id} is a product of merchant {MERCHANT}, not of merchant {OTHER_MERCHANT}" in error
    assert statuses(631) == [(ours.id, "ACTIVE")] and statuses(633) == [(ours.id, "ACTIVE")] and statuses(632) == []
    assert set(Product.all_objects.filter(product_id__in=[631, 632, 633]).values_list("product_id", "merchant_id", "deleted_at")) == {
        (631, MERCHANT, None),
        (632, MERCHANT, None),
    }


def test_a_change_naming_another_merchants_tax_group_is_parked_at_once_and_changes_nothing(raw_producer, stream):
    ours, theirs = group(), group(OTHER_MERCHANT)
    services.product_apply(product_id=641, merchant_id=MERCHANT, tax_group_id=ours.id)
    hostile = [
        change("u", 641, tax_group_id=theirs.id),  # our known product, their group
        change("c", 642, tax_group_id=theirs.id),  # a new product of ours, their group
    ]
    produce(raw_producer, stream, [*hostile, change("c", 643, tax_group_id=ours.id)])
    errors = parked_at_once(read_topic(f"{stream}.DLQ", expected=len(hostile), timeout=30))
    wait_for(lambda: TaxSet.objects.filter(product_id=643).exists(), message="the good change")
    assert len(errors) == len(hostile)
    for error in errors:
        assert f"tax_group_id {theirs.id} is a tax group of another merchant than the product's ({MERCHANT})" in error
    assert statuses(641) == [(ours.id, "ACTIVE")] and statuses(642) == []
    assert not Product.objects.filter(product_id=642).exists()  # not even learned
