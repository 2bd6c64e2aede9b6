from django.db import models

from merchant_platform.messaging.models import OutboxMessageBase, ProcessedMessageBase


class OutboxMessage(OutboxMessageBase):
    """The test app's outbox table, as a service declares its own."""


class ProcessedMessage(ProcessedMessageBase):
    """The test app's record of handled messages, as a service declares its own."""


class Order(models.Model):
    """A write that announces itself through the outbox."""

    reference = models.CharField(max_length=64)


class Effect(models.Model):
    """What a test handler did: one row per application of a message."""

    run = models.CharField(max_length=64, db_index=True)
    value = models.CharField(max_length=255)


class CdcItem(models.Model):
    """A captured table with the column types the relay converts."""

    id = models.BigIntegerField(primary_key=True)
    name = models.CharField(max_length=64)
    price = models.DecimalField(max_digits=10, decimal_places=2, null=True)
    active = models.BooleanField(default=True)
    happened_at = models.DateTimeField(null=True)
    day = models.DateField(null=True)
    blob = models.BinaryField(null=True)
    data = models.JSONField(null=True)
