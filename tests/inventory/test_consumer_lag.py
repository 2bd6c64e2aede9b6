"""Consumer lag for the spec's alert (lag above 10,000, spec 8): the beat task reads each inventory
consumer's lag from the broker (end offsets minus the group's commits, also while the consumers are
down) and logs it, at error level above INVENTORY_CONSUMER_LAG_ALERT."""

from __future__ import annotations

import pytest
from django.test import override_settings
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from apps.inventory import tasks
from apps.inventory.consumers import PAYMENT_CONSUMER
from merchant_platform.messaging.lag import group_lag
from merchant_platform.messaging.registry import ConsumerSpec, _registry
from tests.support.broker import BROKER, produce, unique

pytestmark = pytest.mark.django_db(databases="__all__")


def commit(group: str, topic: str, offset: int) -> None:
    consumer = KafkaConsumer(bootstrap_servers=BROKER, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def events(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.msg["event"]) for r in caplog.records if r.name == "apps.inventory.tasks"]


def test_lag_counts_what_the_group_has_not_committed(make_topic, raw_producer):
    topic, group = make_topic(partitions=1), unique("lag")
    produce(raw_producer, topic, [{"n": n} for n in range(12)])
    assert group_lag(group, [topic]) == {topic: {0: 12}}  # never committed: from the first record
    commit(group, topic, 5)
    assert group_lag(group, [topic]) == {topic: {0: 7}}


def test_the_beat_task_logs_an_error_above_the_threshold(make_topic, raw_producer, monkeypatch, caplog):
    topic, group = make_topic(partitions=1), unique("lag")
    produce(raw_producer, topic, [{"n": n} for n in range(6)])
    registered = _registry[PAYMENT_CONSUMER]
    monkeypatch.setitem(_registry, PAYMENT_CONSUMER, ConsumerSpec(**{**registered.__dict__, "topics": (topic,), "group_id": group}))
    monkeypatch.setattr(tasks.consumers, "NAMES", (PAYMENT_CONSUMER,))
    with override_settings(INVENTORY_CONSUMER_LAG_ALERT=5):
        assert tasks.check_consumer_lag.apply().get() == {PAYMENT_CONSUMER: 6}
    assert events(caplog) == [("ERROR", "inventory.consumer_lag_too_high")]
    caplog.clear()
    commit(group, topic, 6)
    with override_settings(INVENTORY_CONSUMER_LAG_ALERT=5):
        assert tasks.check_consumer_lag.apply().get() == {PAYMENT_CONSUMER: 0}
    assert events(caplog) == [("INFO", "inventory.consumer_lag")]
