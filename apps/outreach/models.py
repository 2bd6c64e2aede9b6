"""Outreach records: inquiries from the public and newsletter subscribers (spec 2.1)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from merchant_platform.models import OwnedModel


class Inquiry(OwnedModel):
    """A message someone sent through the public form; operators read it and may mark it spam.
    Public submissions have no `created_by`; an operator-side owner rule therefore never matches them."""

    class Status(models.TextChoices):
        SENT = "SENT"
        CANCELLED = "CANCELLED"  # marked spam (or otherwise dismissed) by an operator

    name = models.CharField(max_length=120)
    email = models.EmailField(max_length=254)
    phone = models.CharField(max_length=16, blank=True)  # E.164, when given
    subject = models.CharField(max_length=200)
    message = models.TextField(max_length=5000)
    merchant_id = models.BigIntegerField(null=True, blank=True, db_index=True)  # commerce's merchant, a plain id
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SENT)

    class Meta(OwnedModel.Meta):
        db_table = "inquiry"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["status", "created_at"], name="inquiry_status_created")]
        verbose_name_plural = "inquiries"

    def __str__(self) -> str:
        return f"{self.subject} ({self.status})"


class Subscriber(OwnedModel):
    """A newsletter address. `token_hash` is SHA-256 of the subscriber's unsubscribeToken: the token
    itself is only ever in the link mailed to the subscriber (docs/services/outreach.md)."""

    class Status(models.TextChoices):
        PENDING = "PENDING"  # waiting for the double opt-in confirmation
        ACTIVE = "ACTIVE"
        UNSUBSCRIBED = "UNSUBSCRIBED"

    email = models.EmailField(max_length=254)  # normalised to lower case
    name = models.CharField(max_length=120, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    # When a message carrying a fresh token last went out; bounds mail per address (cooldown).
    last_mailed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta(OwnedModel.Meta):
        db_table = "subscriber"
        ordering = ("-created_at", "-id")
        constraints = [
            models.UniqueConstraint(fields=["email"], condition=Q(deleted_at__isnull=True), name="subscriber_email_alive_unique"),
        ]
        indexes = [models.Index(fields=["status"], name="subscriber_status")]

    def __str__(self) -> str:
        return f"{self.email} ({self.status})"
