"""Fixtures of the event backbone tests: unique topics on the real broker (Tansu), raw Kafka
reads, subprocesses of manage.py/celery/uvicorn against the test database, replication slots."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from merchant_platform.messaging.config import client_options
from tests.support.waiting import patience, wait_for

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BROKER = "127.0.0.1:9092"
# Variables a subprocess must not inherit: it states its own topology and ids.
_PROCESS_SPECIFIC = ("APP_SERVICE", "APP_ENV", "APP_ENV_NODE_ID", "APP_ENV_SNOWFLAKE_WORKER_ID", "DJANGO_SETTINGS_MODULE", "RUN_MODE")


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


@pytest.fixture
def test_database_url() -> str:
    settings = connection.settings_dict
    return f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"


@pytest.fixture
def subprocess_env(test_database_url):
    def build(**overrides: str) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in _PROCESS_SPECIFIC and not (key.endswith("_DATABASE_URL") and key != "DATABASE_URL")
        }
        env.update(DJANGO_SETTINGS_MODULE="settings.test", DATABASE_URL=test_database_url, PYTHONUNBUFFERED="1")
        env.update(overrides)
        return env

    return build


class Process:
    """A child in its own process group, its output collected in a file."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path):
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.popen = subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: int, *, group: bool = False) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.popen.pid, signum)
            else:
                self.popen.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.signal(signal.SIGTERM, group=True)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL, group=True)
                self.popen.wait(timeout=10)
        self.signal(signal.SIGKILL, group=True)  # leftovers of the group (pool children)
        self._log.close()


@pytest.fixture
def spawn(tmp_path, subprocess_env):
    """Start `python <args>` (manage.py, -m celery, -m uvicorn); stopped at the end of the test."""
    started: list[Process] = []

    def start(*args: str, env: dict[str, str] | None = None, name: str = "process") -> Process:
        process = Process([sys.executable, *args], env or subprocess_env(), tmp_path / f"{name}-{len(started)}.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
