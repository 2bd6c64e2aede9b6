"""Abstract records a service declares (one line each, in its own models.py) to publish through the
transactional outbox and to consume idempotently:

    class OutboxMessage(OutboxMessageBase): ...
    class ProcessedMessage(ProcessedMessageBase): ...

The concrete tables then live in the service's own schema, so an event is written by the same
connection and transaction as the change it announces, and a handler's "already processed" mark
commits or rolls back together with the handler's effect.

An outbox row is pending, sent (`sent_at`), or parked (`parked_at`, `parked_reason`): the relay
could never send it (a record over the producer's limit, an invalid topic...), so it set it aside
and went on with the rows behind it. Requeue a parked row after fixing its cause by clearing
`parked_at`.

These are infrastructure rows, not business records: the outbox orders by a database sequence
(commit order of dependent writes is the sequence order) rather than a snowflake id, sent rows are
pruned after OUTBOX_RETENTION_HOURS, and neither is soft-deleted.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone


class OutboxMessageBase(models.Model):
    id = models.BigAutoField(primary_key=True)
    message_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    topic = models.CharField(max_length=249)
    key = models.CharField(max_length=255, null=True, blank=True)
    value = models.TextField(help_text="The JSON value, serialised once at publication.")
    headers = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    parked_at = models.DateTimeField(null=True, blank=True, help_text="When the relay set the row aside: it can never be sent as it is.")
    parked_reason = models.TextField(blank=True, default="", help_text="Why the relay parked the row (the producer's error).")

    class Meta:
        abstract = True
        indexes = [
            models.Index(
                fields=["id"], condition=models.Q(sent_at__isnull=True, parked_at__isnull=True), name="%(app_label)s_outbox_pending"
            ),
            models.Index(fields=["sent_at"], condition=models.Q(sent_at__isnull=False), name="%(app_label)s_outbox_sent"),
            # What the parked-rows gauge counts at every scrape: a few rows, if any.
            models.Index(fields=["id"], condition=models.Q(parked_at__isnull=False), name="%(app_label)s_outbox_parked"),
        ]

    def __str__(self) -> str:
        return f"{self.topic} {self.message_id} ({self.status.lower()})"

    @property
    def status(self) -> str:
        if self.sent_at:
            return "SENT"
        return "PARKED" if self.parked_at else "PENDING"


class ProcessedMessageBase(models.Model):
    id = models.BigAutoField(primary_key=True)
    consumer = models.CharField(max_length=200)
    message_id = models.CharField(max_length=255)
    processed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True
        constraints = [models.UniqueConstraint(fields=["consumer", "message_id"], name="%(app_label)s_processed_once")]

    def __str__(self) -> str:
        return f"{self.consumer} {self.message_id}"
