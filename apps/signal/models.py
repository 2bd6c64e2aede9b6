"""Signal records: the notifications of a user (spec 4.8, 6.2), and the consumer's record of the
broker messages it already stored (the de-duplication spec 6.2 lacks)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from merchant_platform.messaging.models import ProcessedMessageBase
from merchant_platform.models import BaseModel


class Notification(BaseModel):
    """One notification for one user (`recipient_id`, identity's user id: the JWT subject).

    `message_id` is the broker message it came from (the producer's `messageId` header, else topic,
    partition and offset): unique, so a redelivered message can never store a second row."""

    recipient_id = models.BigIntegerField()
    topic = models.CharField(max_length=200)
    room = models.CharField(max_length=200, blank=True)
    title = models.CharField(max_length=200, blank=True)
    body = models.TextField(max_length=5000, blank=True)
    data = models.JSONField(default=dict, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    message_id = models.CharField(max_length=255, null=True, blank=True, editable=False)

    class Meta(BaseModel.Meta):
        db_table = "notification"
        ordering = ("-created_at", "-id")
        constraints = [
            models.UniqueConstraint(fields=["message_id"], condition=Q(message_id__isnull=False), name="notification_message_once"),
        ]
        indexes = [
            models.Index(fields=["recipient_id", "created_at"], name="notification_recipient"),
            models.Index(fields=["recipient_id"], condition=Q(read_at__isnull=True, deleted_at__isnull=True), name="notification_unread"),
        ]

    def __str__(self) -> str:
        return f"{self.topic} for {self.recipient_id}"


class ProcessedMessage(ProcessedMessageBase):
    """Broker messages the signal consumers handled (docs/events.md, idempotency)."""
