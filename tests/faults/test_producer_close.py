"""A process that stops while the broker is away (`manage.py consume` and `manage.py cdc` close the
producer on their way out) exits cleanly: closing a producer that still holds unacknowledged records
logs them as left to the outbox instead of raising (the rows stay pending and are sent later)."""

from __future__ import annotations

import gc

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from merchant_platform.messaging.producer import close_producer, get_producer


@pytest.fixture
def producer_on_private_broker(settings, private_broker):
    close_producer()
    settings.KAFKA_BOOTSTRAP_SERVERS = [private_broker.address]
    admin = KafkaAdminClient(bootstrap_servers=private_broker.address)
    admin.create_topics([NewTopic("fault-test", 1, 1)])
    admin.close()
    yield private_broker
    close_producer()


def test_closing_the_producer_while_the_broker_is_away_does_not_raise(producer_on_private_broker, log_lines):
    producer = get_producer()
    producer.send("fault-test", value=b"before").get(timeout=30)  # connected
    producer_on_private_broker.proxy.cut()
    producer.send("fault-test", value=b"while away")
    close_producer(timeout=1)
    assert log_lines.matching("producer.close_incomplete")
    producer_on_private_broker.proxy.restore()  # kafka-python's finaliser closes it again: let that one flush
    del producer
    gc.collect()
