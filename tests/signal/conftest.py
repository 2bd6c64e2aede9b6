"""Fixtures of the signal tests."""

from __future__ import annotations

from apps.signal import services

NOTIFICATIONS = "/v1/api/signal/notifications"


def notify(recipient_id: int, topic: str = "order.paid", **fields):
    """A stored notification, as the activity consumer stores one."""
    return services.notification_store(recipient_id=recipient_id, topic=topic, **fields)


# The event tests' broker fixtures (unique topics on the real broker, a raw producer).
from tests.events.conftest import kafka_admin, make_topic, raw_producer  # noqa: E402, F401
