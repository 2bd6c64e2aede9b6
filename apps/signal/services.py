"""Every write of the signal service: notifications stored from the activity topic (spec 6.2),
read marks and soft deletes by their recipient (spec 4.8).

A notification names its recipient and, optionally, a room: the recipient must be allowed to join
that room by the rules sockets obey (rooms.py), so no producer can put a user's notification into
another merchant's room, nor into another user's.

A notification is pushed to its recipient's own room (and to the room the producer named) once its
row is committed, through the kernel's realtime helper: every signal replica's /stream sockets in
those rooms receive it (spec 1.4), encrypted per socket by the replica that holds it.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.signal import rooms
from apps.signal.models import Notification
from merchant_platform.errors import ApiError, NotFound
from merchant_platform.realtime import broadcast_many
from merchant_platform.verification.tokens import TokenUser

DB = "signal"

NOTIFICATION_EVENT = "notification"
USER_ROOM_PREFIX = "user."


class RoomForbidden(ApiError):
    """The notification's recipient may not join the room it names (the code a socket gets too)."""

    status_code = 403
    default_code = "ROOM_FORBIDDEN"
    default_detail = "The recipient may not join this room."


def user_room(user_id: int) -> str:
    """The room only that user may join: its notifications arrive there."""
    return f"{USER_ROOM_PREFIX}{user_id}"


def notification_payload(notification: Notification) -> dict:
    """What a socket receives for a stored notification (and what the REST API shows of it)."""
    return {
        "id": str(notification.id),
        "recipientId": str(notification.recipient_id),
        "topic": notification.topic,
        "room": notification.room or None,
        "title": notification.title,
        "body": notification.body,
        "data": notification.data,
        "readAt": notification.read_at.isoformat() if notification.read_at else None,
        "createdAt": notification.created_at.isoformat(),
    }


def notification_store(
    *,
    recipient_id: int,
    topic: str,
    message_id: str | None = None,
    room: str = "",
    title: str = "",
    body: str = "",
    data: dict | None = None,
) -> Notification | None:
    """Store a notification and push it once the row commits. A message id seen before stores and
    pushes nothing (None): the unique index on `message_id` decides, so two consumers racing on one
    redelivered message cannot both store it. A room the recipient may not join is RoomForbidden,
    and nothing is stored."""
    if room and not rooms.may_join(TokenUser(id=recipient_id, claims={}), room):
        raise RoomForbidden(f"recipient {recipient_id} may not join room {room!r}", extra={"room": room})
    notification = Notification(
        recipient_id=recipient_id, topic=topic, room=room, title=title, body=body, data=data or {}, message_id=message_id
    )
    with transaction.atomic(using=DB):
        if message_id is not None:
            # ON CONFLICT DO NOTHING on the partial unique index: a duplicate is no error that would
            # break the caller's transaction.
            created = Notification.objects.using(DB).bulk_create([notification], ignore_conflicts=True)
            if not Notification.all_objects.using(DB).filter(id=created[0].id).exists():
                return None
        else:
            notification.save(using=DB, force_insert=True)
        targets = [user_room(recipient_id)]
        if room and room not in targets:
            targets.append(room)
        broadcast_many(targets, NOTIFICATION_EVENT, notification_payload(notification), using=DB)
    return notification


def _own(notification_id: int, recipient_id: int) -> Notification:
    """The recipient's notification, locked; another user's is as missing as a deleted one (404)."""
    notification = Notification.objects.using(DB).select_for_update().filter(id=notification_id, recipient_id=recipient_id).first()
    if notification is None:
        raise NotFound("No such notification.")
    return notification


def notification_mark_read(*, notification_id: int, recipient_id: int) -> Notification:
    """Mark one notification read (idempotent: the first read time stays)."""
    with transaction.atomic(using=DB):
        notification = _own(notification_id, recipient_id)
        if notification.read_at is None:
            notification.read_at = timezone.now()
            notification.save(using=DB, update_fields=["read_at", "updated_at"])
    return notification


def notification_mark_all_read(*, recipient_id: int) -> int:
    """Mark every unread notification of the recipient read; how many changed. One UPDATE."""
    now = timezone.now()
    with transaction.atomic(using=DB):
        return Notification.objects.using(DB).filter(recipient_id=recipient_id, read_at__isnull=True).update(read_at=now, updated_at=now)


def notification_delete(*, notification_id: int, recipient_id: int) -> None:
    """Soft delete (spec 1.2.6): the row stays, the API no longer shows it."""
    with transaction.atomic(using=DB):
        _own(notification_id, recipient_id).delete()
