"""The transactional outbox: an event exists if and only if its change committed, is relayed right
after the commit, survives a broker that is down at commit time, and keeps its order."""

import json
import logging
import uuid

import pytest
from django.db import transaction
from django.test import override_settings

from merchant_platform import metrics
from merchant_platform.context import bind_request_id, reset_request_id
from merchant_platform.messaging import publish, publish_many
from merchant_platform.messaging.config import MAX_RECORD_BYTES
from merchant_platform.messaging.monitoring import OutboxParkedCollector
from merchant_platform.messaging.outbox import OutboxRelay
from merchant_platform.messaging.producer import EventTooLarge, PublishError, close_producer
from merchant_platform.messaging.stores import outbox_model_for
from tests.kernel.events.testapp.models import Order, OutboxMessage
from tests.support.broker import read_topic
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def test_outbox_model_is_found_by_alias():
    assert outbox_model_for("default") is OutboxMessage


def test_event_is_published_after_commit_with_headers(make_topic):
    topic = make_topic()
    token = bind_request_id("req-outbox-1")
    try:
        with transaction.atomic(using="default"):
            order = Order.objects.create(reference="A-1")
            row = publish(topic, {"orderId": str(order.id), "total": 12}, event_type="order.created", key=order.id, using="default")
            assert OutboxMessage.objects.get(pk=row.pk).sent_at is None
    finally:
        reset_request_id(token)
    [record] = read_topic(topic, expected=1)
    assert json.loads(record.value) == {"orderId": str(order.id), "total": 12}
    assert record.key == str(order.id).encode()
    headers = {name: value.decode() for name, value in record.headers}
    assert headers["eventType"] == "order.created"
    assert headers["requestId"] == "req-outbox-1"
    assert headers["source"] == "platform"  # the default alias belongs to no service
    assert headers["messageId"] == row.message_id.hex
    assert int(headers["timestamp"]) > 0
    wait_for(lambda: OutboxMessage.objects.get(pk=row.pk).sent_at is not None, message="row marked sent")


def test_rolled_back_change_publishes_nothing(make_topic):
    topic = make_topic()
    with pytest.raises(RuntimeError), transaction.atomic(using="default"):
        Order.objects.create(reference="B-1")
        publish(topic, {"n": 1}, event_type="order.created", using="default")
        raise RuntimeError("the write fails")
    assert not OutboxMessage.objects.filter(topic=topic).exists()
    assert read_topic(topic, expected=1, timeout=2) == []


def test_broker_down_at_commit_keeps_the_event_until_it_is_back(make_topic):
    topic = make_topic()
    close_producer()
    try:
        with override_settings(KAFKA_BOOTSTRAP_SERVERS=["127.0.0.1:1"]):
            with transaction.atomic(using="default"):
                Order.objects.create(reference="C-1")
                row = publish(topic, {"n": 1}, event_type="order.created", using="default")
            with pytest.raises(PublishError):
                OutboxRelay(OutboxMessage).relay_pending()
            close_producer()
        assert OutboxMessage.objects.get(pk=row.pk).sent_at is None
    finally:
        close_producer()
    OutboxRelay(OutboxMessage).relay_pending()  # the broker is back (the after-commit thread may be first)
    assert OutboxMessage.objects.get(pk=row.pk).sent_at is not None
    assert [json.loads(r.value) for r in read_topic(topic, expected=1)] == [{"n": 1}]


def test_relay_keeps_order_per_key(make_topic):
    topic = make_topic(partitions=3)
    with transaction.atomic(using="default"):
        for n in range(30):
            publish(topic, {"n": n}, event_type="counter.tick", key=f"k{n % 3}", using="default")
    OutboxRelay(OutboxMessage, batch_size=7).relay_pending()
    records = read_topic(topic, expected=30)
    assert len(records) == 30
    for key in ("k0", "k1", "k2"):
        ordered = [json.loads(r.value)["n"] for r in sorted(records, key=lambda r: r.offset) if r.key == key.encode()]
        assert ordered == sorted(ordered) and len(ordered) == 10
    assert not OutboxMessage.objects.filter(topic=topic, sent_at__isnull=True).exists()


def test_publish_many_writes_its_events_in_one_go_and_in_order(make_topic):
    topic = make_topic(partitions=1)
    with transaction.atomic(using="default"):
        Order.objects.create(reference="D-1")
        rows = publish_many(topic, [(f"k{n}", {"n": n}) for n in range(5)], event_type="counter.tick", using="default")
        assert OutboxMessage.objects.filter(topic=topic, sent_at__isnull=True).count() == 5
    records = sorted(read_topic(topic, expected=5), key=lambda record: record.offset)
    assert [(record.key, json.loads(record.value)) for record in records] == [(f"k{n}".encode(), {"n": n}) for n in range(5)]
    message_ids = [dict(record.headers)["messageId"].decode() for record in records]
    assert message_ids == [row.message_id.hex for row in rows] and len(set(message_ids)) == 5
    assert {dict(record.headers)["eventType"] for record in records} == {b"counter.tick"}
    wait_for(lambda: not OutboxMessage.objects.filter(topic=topic, sent_at__isnull=True).exists(), message="rows marked sent")


def test_publish_many_in_a_rolled_back_transaction_publishes_nothing(make_topic):
    topic = make_topic()
    with pytest.raises(RuntimeError), transaction.atomic(using="default"):
        publish_many(topic, [(None, {"n": 1}), (None, {"n": 2})], event_type="order.created", using="default")
        raise RuntimeError("the write fails")
    assert not OutboxMessage.objects.filter(topic=topic).exists()
    assert publish_many(topic, [], event_type="order.created", using="default") == []


def test_the_relay_parks_an_event_it_can_never_send_and_goes_on_with_the_rows_behind_it(make_topic, caplog):
    # Rows written before `publish` checked the size (or by hand): an oversized record made the
    # relay's send raise inside its transaction, roll back and retry forever, stopping the outbox.
    caplog.set_level(logging.ERROR, logger="merchant_platform.messaging.outbox")
    topic = make_topic(partitions=1)

    def row(value: str, *, to: str = topic) -> OutboxMessage:
        return OutboxMessage.objects.create(topic=to, value=value, headers={"messageId": uuid.uuid4().hex, "eventType": "t"})

    first = row('{"n": 1}')
    oversized = row(json.dumps({"blob": "x" * (MAX_RECORD_BYTES + 1)}))
    bad_topic = row('{"n": 2}', to="not a topic!")
    last = row('{"n": 3}')
    assert OutboxRelay(OutboxMessage).relay_pending() == 2
    assert [json.loads(r.value) for r in sorted(read_topic(topic, expected=2), key=lambda r: r.offset)] == [{"n": 1}, {"n": 3}]
    rows = {r.pk: r for r in OutboxMessage.objects.filter(pk__in=[first.pk, oversized.pk, bad_topic.pk, last.pk])}
    assert [rows[pk].status for pk in (first.pk, oversized.pk, bad_topic.pk, last.pk)] == ["SENT", "PARKED", "PARKED", "SENT"]
    assert rows[oversized.pk].parked_reason.startswith("MessageSizeTooLargeError")
    assert "not a topic!" in rows[bad_topic.pk].parked_reason
    parked_lines = [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "outbox.parked"]
    assert sorted(line["id"] for line in parked_lines) == [oversized.pk, bad_topic.pk]
    assert OutboxRelay(OutboxMessage).relay_pending() == 0  # parked rows are not tried again
    assert OutboxRelay(OutboxMessage).pending_count() == 0
    [gauge] = (collector for collector in metrics._scrape_collectors if isinstance(collector, OutboxParkedCollector))
    [family] = gauge.collect()
    assert {sample.labels["table"]: sample.value for sample in family.samples}[OutboxMessage._meta.db_table] == 2


def test_publish_refuses_an_event_over_the_record_limit(make_topic):
    topic = make_topic()
    with pytest.raises(EventTooLarge) as refused, transaction.atomic(using="default"):
        publish(topic, {"blob": "x" * MAX_RECORD_BYTES}, event_type="order.created", using="default")
    assert refused.value.status_code == 400 and refused.value.code == "EVENT_TOO_LARGE"
    assert refused.value.extra["maxBytes"] == MAX_RECORD_BYTES and refused.value.extra["sizeBytes"] > MAX_RECORD_BYTES
    assert not OutboxMessage.objects.filter(topic=topic).exists()
    publish(topic, {"blob": "x" * (MAX_RECORD_BYTES - 1024)}, event_type="order.created", using="default")  # just under: accepted
    wait_for(lambda: OutboxMessage.objects.filter(topic=topic, sent_at__isnull=False).exists(), message="the event under the limit sent")
