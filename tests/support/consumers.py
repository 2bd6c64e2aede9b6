"""Consumers under the kernel's runner in threads of the test process. A pytest plugin
(tests/conftest.py loads it) for `run_consumer`."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from merchant_platform.messaging.registry import ConsumerSpec, registered_consumers
from merchant_platform.messaging.runner import ConsumerRunner
from tests.support.broker import unique


def consumer_spec(name: str, topic: str, *, group: str | None = None, **overrides) -> ConsumerSpec:
    """The registered consumer `name` on a test topic, in a group of its own, retrying at once."""
    (registered,) = registered_consumers(names={name})
    fields = {"topics": (topic,), "group_id": group or unique(f"{registered.service}-test"), "retry_backoff_seconds": 0.05}
    return dataclasses.replace(registered, **{**fields, **overrides})


class RunningConsumer:
    """`spec` under the kernel's runner in a thread, until `finish()`."""

    def __init__(self, spec: ConsumerSpec):
        self.spec = spec
        self.stop = threading.Event()
        self.runner = ConsumerRunner(spec, self.stop)
        self.thread = threading.Thread(target=self.runner.run, daemon=True)
        self.thread.start()

    @classmethod
    def registered(cls, name: str, topic: str, **options) -> RunningConsumer:
        """The registered consumer `name` as consumer_spec gives it."""
        return cls(consumer_spec(name, topic, **options))

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()


@pytest.fixture
def run_consumer():
    """`start(spec)`: a RunningConsumer finished at the end of the test."""
    started: list[RunningConsumer] = []

    def start(spec: ConsumerSpec) -> RunningConsumer:
        started.append(RunningConsumer(spec))
        return started[-1]

    yield start
    for running in started:
        running.finish()
