"""Kafka client configuration: brokers, security protocol and SASL SCRAM credentials from the
environment (settings/messaging.py), shared by every producer, consumer and admin client."""

from __future__ import annotations

import os
import socket

from django.conf import settings

from merchant_platform.registry import Service

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# The largest record the producer sends (its max_request_size, kafka-python's default; a broker's
# message.max.bytes defaults to about the same): `publish` refuses an event over it.
MAX_RECORD_BYTES = 1_048_576


def bootstrap_servers() -> list[str]:
    return [server.strip() for server in settings.KAFKA_BOOTSTRAP_SERVERS if server.strip()]


def client_options(role: str) -> dict:
    """Options every kafka-python client takes: brokers, client id and, when the protocol says so,
    SASL (SCRAM-SHA-512 by default: taxation and signal use it in production)."""
    options = {
        "bootstrap_servers": bootstrap_servers(),
        "client_id": f"merchant-platform-{role}-{socket.gethostname()}-{os.getpid()}",
        "security_protocol": settings.KAFKA_SECURITY_PROTOCOL,
        # Give up on an unreachable broker list after 5 s (kafka-python waits 30 s by default).
        "bootstrap_timeout_ms": 5_000,
    }
    if settings.KAFKA_SECURITY_PROTOCOL in SASL_PROTOCOLS:
        options.update(
            sasl_mechanism=settings.KAFKA_SASL_MECHANISM,
            sasl_plain_username=settings.KAFKA_SASL_USERNAME,
            sasl_plain_password=settings.KAFKA_SASL_PASSWORD,
        )
    return options


def producer_options() -> dict:
    """acks=all with the idempotent producer: an acknowledged record is on every in-sync replica, and
    retries neither duplicate nor reorder records within a partition."""
    return {
        **client_options("producer"),
        "acks": "all",
        "enable_idempotence": True,
        "max_request_size": MAX_RECORD_BYTES,
        "linger_ms": 5,
        "batch_size": 256 * 1024,  # the CDC relay and outbox send thousands of records at once
        "max_block_ms": 10_000,
        "request_timeout_ms": 10_000,
        "delivery_timeout_ms": 30_000,
    }


def consumer_options(*, group_id: str, offset_reset: str) -> dict:
    """Manual commits only (the runner commits after the handler succeeded)."""
    return {
        **client_options("consumer"),
        "group_id": group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": offset_reset,
        "session_timeout_ms": settings.KAFKA_CONSUMER_SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": settings.KAFKA_CONSUMER_HEARTBEAT_INTERVAL_MS,
        "max_poll_interval_ms": settings.KAFKA_CONSUMER_MAX_POLL_INTERVAL_MS,
        "max_poll_records": settings.KAFKA_CONSUMER_MAX_POLL_RECORDS,
        "allow_auto_create_topics": False,
    }


def service_code(service: Service) -> int:
    """The service's number in the spec's naming: its external port minus 31000 (inventory 31050 ->
    50, finance 31040 -> 40, taxation 31032 -> 32); ten times its worker id when it has no port."""
    if service.external_port:
        return service.external_port - 31000
    return service.worker_id * 10


def consumer_group_id(service: Service, consumer: str = "") -> str:
    """SVC-00050-INVENTORY_CONSUMER_GROUP, SVC-00040-FINANCE_CONSUMER_GROUP (spec 6.2), and the same
    pattern for every other service; KAFKA_CONSUMER_GROUP_SUFFIX is appended, `{consumer}` in it
    replaced by the consumer's name (a group per consumer)."""
    suffix = settings.KAFKA_CONSUMER_GROUP_SUFFIX.replace("{consumer}", consumer)
    return f"SVC-{service_code(service):05d}-{service.name.upper()}_CONSUMER_GROUP{suffix}"
