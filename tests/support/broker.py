"""The real broker (Tansu) in tests: unique topics, a raw producer, and raw reads of a topic or of a
group's committed offsets. A pytest plugin (tests/conftest.py loads it): its fixtures serve every
test directory."""

from __future__ import annotations

import contextlib
import json
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from merchant_platform.messaging.config import client_options
from tests.support.waiting import patience, wait_for

BROKER = "127.0.0.1:9092"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def kafka_admin():
    admin = KafkaAdminClient(**client_options("test-admin"))
    yield admin
    admin.close()


@pytest.fixture
def make_topic(kafka_admin):
    """Create unique topics (deleted after the test, with their dead-letter topics)."""
    created: list[str] = []

    def make(prefix: str = "events-test", partitions: int = 3) -> str:
        name = unique(prefix)
        kafka_admin.create_topics([NewTopic(name, partitions, 1)])
        created.append(name)
        return name

    yield make
    existing = set(kafka_admin.list_topics())
    doomed = [name for topic in created for name in (topic, f"{topic}.DLQ") if name in existing]
    if doomed:
        with contextlib.suppress(Exception):
            kafka_admin.delete_topics(doomed)


@pytest.fixture(scope="session")
def raw_producer():
    producer = KafkaProducer(bootstrap_servers=BROKER, acks="all")
    yield producer
    producer.close()


def produce(producer: KafkaProducer, topic: str, values: list, *, key=None, headers: dict | None = None) -> None:
    for value in values:
        encoded = value if isinstance(value, bytes) else json.dumps(value).encode()
        key_bytes = None if key is None else str(key(value) if callable(key) else key).encode()
        wire = [(name, str(v).encode()) for name, v in (headers or {}).items()]
        producer.send(topic, value=encoded, key=key_bytes, headers=wire).get(timeout=10)


def read_topic(topic: str, *, expected: int | None, timeout: float = 15.0) -> list:
    """Every record of `topic` from the beginning (no group), waiting until `expected` arrived;
    with `expected=None`, every record the topic held when called (up to its end offsets)."""
    reader = KafkaConsumer(bootstrap_servers=BROKER, enable_auto_commit=False, consumer_timeout_ms=500)
    try:
        partitions = wait_for(lambda: reader.partitions_for_topic(topic), timeout=timeout, message=f"topic {topic}")
        assigned = [TopicPartition(topic, p) for p in partitions]
        reader.assign(assigned)
        reader.seek_to_beginning(*assigned)
        ends = reader.end_offsets(assigned) if expected is None else {}
        records: list = []

        def missing() -> bool:
            if expected is None:
                return any(reader.position(partition) < end for partition, end in ends.items())
            return len(records) < expected

        deadline = time.monotonic() + patience(timeout)
        while missing() and time.monotonic() < deadline:
            for batch in reader.poll(timeout_ms=300).values():
                records += batch
        return sorted(records, key=lambda r: (r.timestamp, r.partition, r.offset))
    finally:
        reader.close()


def committed_offsets(group: str, topic: str) -> dict[int, int | None]:
    reader = KafkaConsumer(bootstrap_servers=BROKER, group_id=group, enable_auto_commit=False)
    try:
        partitions = reader.partitions_for_topic(topic) or set()
        return {p: reader.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        reader.close()
