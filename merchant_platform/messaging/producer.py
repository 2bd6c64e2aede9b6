"""The process's Kafka producer and the direct (not outbox) publication of one event."""

from __future__ import annotations

import os
import threading

from kafka import KafkaProducer
from kafka.errors import KafkaError
from kafka.record.default_records import DefaultRecordBatchBuilder

from merchant_platform.context import current_request_id
from merchant_platform.errors import ApiError
from merchant_platform.logging import get_logger
from merchant_platform.messaging.config import MAX_RECORD_BYTES, producer_options
from merchant_platform.messaging.messages import encode_key, encode_value, event_headers, wire_headers

log = get_logger(__name__)
ACK_TIMEOUT_SECONDS = 30.0


class PublishError(RuntimeError):
    """The broker did not acknowledge a record (spec 7: ENQUEUE_FAILED where an API reports it)."""

    code = "ENQUEUE_FAILED"


class EventTooLarge(ApiError):
    """An event whose record would exceed the producer's limit: refused when it is published (a 400
    where it reaches an API), since no broker would ever take it."""

    default_code = "EVENT_TOO_LARGE"
    default_detail = "The event is too large to publish."


def record_size(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> int:
    """The producer's own upper bound of a record's size, which it checks against its limit."""
    return DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)


def check_record_size(topic: str, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> None:
    size = record_size(key, value, headers)
    if size > MAX_RECORD_BYTES:
        raise EventTooLarge(
            f"The event for {topic} is {size} bytes serialised, over the {MAX_RECORD_BYTES}-byte limit of a broker record.",
            extra={"sizeBytes": size, "maxBytes": MAX_RECORD_BYTES},
        )


_lock = threading.Lock()
_state: dict[str, object] = {"pid": None, "producer": None}


def get_producer() -> KafkaProducer:
    """One thread-safe producer per process, created again after a fork (its I/O thread does not
    survive one)."""
    pid = os.getpid()
    if _state["pid"] != pid:
        with _lock:
            if _state["pid"] != pid:
                _state.update(producer=KafkaProducer(**producer_options()), pid=pid)
    return _state["producer"]  # type: ignore[return-value]


def close_producer(timeout: float = 5.0) -> None:
    with _lock:
        producer, pid = _state["producer"], _state["pid"]
        _state.update(producer=None, pid=None)
    if producer is not None and pid == os.getpid():
        try:
            producer.close(timeout=timeout)
        except KafkaError as exc:  # records the broker never acknowledged: their outbox rows stay pending
            log.warning("producer.close_incomplete", error=str(exc))


def send_event(
    topic: str,
    payload,
    *,
    event_type: str,
    source: str,
    key: str | int | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = ACK_TIMEOUT_SECONDS,
):
    """Publish one event now and wait for the broker's acknowledgement; raises PublishError.

    For events that announce a database change use `merchant_platform.messaging.publish` instead
    (the outbox): this call is for messages with no transaction behind them (dead letters, probes).
    """
    all_headers = event_headers(event_type=event_type, source=source, request_id=current_request_id(), extra=headers)
    try:
        future = get_producer().send(topic, value=encode_value(payload), key=encode_key(key), headers=wire_headers(all_headers))
        return future.get(timeout=timeout)
    except KafkaError as exc:
        log.warning("kafka.publish_failed", topic=topic, eventType=event_type, error=str(exc))
        raise PublishError(f"broker did not acknowledge the {event_type} event on {topic}: {exc}") from exc
