"""Kafka handlers of the signal service (spec 6.2): `signal.activity-notification` stores a
notification row and pushes it over the WebSocket.

The value is untrusted: a room its recipient may not join (another merchant's, another user's) is
refused like an invalid field, parked on the dead-letter topic at once with the reason.

Idempotent twice over: the runner skips a message id it recorded (docs/events.md), and the row's
unique `message_id` refuses a second copy, so a redelivery stores and pushes nothing."""

from __future__ import annotations

from apps.signal import services
from apps.signal.serializers import ActivityMessageSerializer
from merchant_platform.messaging import Message, consumer, topics
from merchant_platform.messaging.messages import UndecodableMessage

ACTIVITY_CONSUMER = "signal.activity-notification"


@consumer(ACTIVITY_CONSUMER, topics=[topics.SIGNAL_ACTIVITY_NOTIFICATION])
def activity_notification(message: Message) -> None:
    """Validate the value and store it. A value no retry can fix (not an object, a missing or bad
    field, a room the recipient may not join) is parked on the dead-letter topic at once, naming
    the fields. A policy store that cannot answer is an ordinary failure: retried, then parked."""
    serializer = ActivityMessageSerializer(data=message.value)
    if not serializer.is_valid():
        raise UndecodableMessage(f"invalid activity notification: {dict(serializer.errors)}")
    try:
        services.notification_store(**serializer.validated_data, message_id=message.message_id)
    except services.RoomForbidden as exc:
        raise UndecodableMessage(f"refused activity notification: room: {exc.code}: {exc.detail}") from exc
