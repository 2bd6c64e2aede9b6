"""Payment records (schema `payment`): transactions opened by the sale side, their attempts through
providers, their refunds, webhook subscriptions and their deliveries, and the outbox of payment's
Kafka events.

States and transitions are in apps/payment/states.py and docs/services/payment.md.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from merchant_platform.idempotency import IdempotencyKeyBase
from merchant_platform.messaging.models import OutboxMessageBase
from merchant_platform.models import BaseModel, OwnedModel
from merchant_platform.money import MAX_AMOUNT


class Channel(models.TextChoices):
    QR = "QR"
    PHONE_POS = "PHONE_POS"
    SMART_POS = "SMART_POS"
    SYSTEM = "SYSTEM"


class PaymentTransaction(OwnedModel):
    """What the sale side asks to be paid: an amount for one of its records (`source_id`)."""

    class Status(models.TextChoices):
        NEW = "NEW"
        SETTLED = "SETTLED"
        CANCELLED = "CANCELLED"
        PARTIALLY_REFUNDED = "PARTIALLY_REFUNDED"
        REFUNDED = "REFUNDED"

    class SourceType(models.TextChoices):
        ORDER = "ORDER"  # a sale order: opened with service credentials only (commerce's sale side)
        MANUAL = "MANUAL"  # a user's own payment: its sourceId is the merchant's free reference, no lines

    merchant_id = models.BigIntegerField()
    source_type = models.CharField(max_length=8, choices=SourceType.choices, default=SourceType.ORDER, db_default=SourceType.ORDER)
    source_id = models.CharField(max_length=64)  # the sale side's reference (its order id)
    amount = models.BigIntegerField()  # minor units of `currency`
    # The tax included in `amount`, as the sale side quoted it (finance credits it to tax payable); null: not given.
    tax_amount = models.BigIntegerField(null=True, blank=True)
    paid_amount = models.BigIntegerField(default=0)  # sum of the successful attempts
    refunded_amount = models.BigIntegerField(default=0, db_default=0)  # sum of the SUCCEEDED refunds
    # Sum of the refunds that are not FAILED (PENDING and SUCCEEDED): what is promised back, so the
    # database itself refuses refunds beyond what was paid (CHECK transaction_refunds_within_paid).
    refund_reserved_amount = models.BigIntegerField(default=0, db_default=0)
    currency = models.CharField(max_length=3)  # ISO 4217
    finance_account_id = models.BigIntegerField(null=True, blank=True)  # chosen by the sale side
    lines = models.JSONField(default=list, blank=True)  # [{"variantId": str, "quantity": int}] for inventory
    description = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.NEW)
    settled_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta(OwnedModel.Meta):
        db_table = "payment_transaction"
        ordering = ("-created_at", "-id")
        constraints = [
            models.UniqueConstraint(
                fields=["merchant_id", "source_type", "source_id"],
                condition=Q(deleted_at__isnull=True),
                name="transaction_merchant_source_alive_unique",
            ),
            models.CheckConstraint(condition=Q(amount__gt=0), name="transaction_amount_positive"),
            models.CheckConstraint(condition=Q(paid_amount__gte=0), name="transaction_paid_not_negative"),
            models.CheckConstraint(condition=Q(amount__lte=MAX_AMOUNT), name="transaction_amount_within_limit"),
            models.CheckConstraint(condition=Q(paid_amount__lte=MAX_AMOUNT), name="transaction_paid_within_limit"),
            models.CheckConstraint(
                condition=Q(tax_amount__isnull=True) | Q(tax_amount__gte=0, tax_amount__lte=F("amount")),
                name="transaction_tax_within_amount",
            ),
            models.CheckConstraint(condition=Q(refunded_amount__gte=0), name="transaction_refunded_not_negative"),
            models.CheckConstraint(condition=Q(refunded_amount__lte=F("paid_amount")), name="transaction_refunded_within_paid"),
            models.CheckConstraint(
                condition=Q(refund_reserved_amount__gte=F("refunded_amount"), refund_reserved_amount__lte=F("paid_amount")),
                name="transaction_refunds_within_paid",
            ),
        ]
        indexes = [models.Index(fields=["merchant_id", "status"], name="transaction_merchant_status")]

    def __str__(self) -> str:
        return f"{self.source_id} {self.amount} {self.currency} ({self.status})"


class PaymentAttempt(BaseModel):
    """One try at collecting (part of) a transaction through a provider channel. `code` is sent to the
    provider as prov_TxnRef: random, unguessable and unique."""

    class Status(models.TextChoices):
        CREATED = "CREATED"
        SENT = "SENT"
        UNKNOWN = "UNKNOWN"  # the provider call timed out: resolved by asking the provider
        SUCCESS = "302_SUCCESS"
        FAILED = "FAILED"
        EXPIRED = "EXPIRED"
        CANCELLED = "CANCELLED"

    transaction = models.ForeignKey(PaymentTransaction, on_delete=models.PROTECT, related_name="attempts")
    merchant_id = models.BigIntegerField()
    channel = models.CharField(max_length=16, choices=Channel.choices)
    code = models.CharField(max_length=64, unique=True)
    amount = models.BigIntegerField()  # minor units of the transaction's currency
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CREATED)
    provider_reference = models.CharField(max_length=128, blank=True, default="")  # prov_TransactionNo
    qr_payload = models.TextField(blank=True, default="")
    bank_code = models.CharField(max_length=32, blank=True, default="")
    failure_reason = models.CharField(max_length=255, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)  # prov_PayDate

    class Meta(BaseModel.Meta):
        db_table = "payment_attempt"
        ordering = ("created_at", "id")
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="attempt_amount_positive"),
            models.CheckConstraint(condition=Q(amount__lte=MAX_AMOUNT), name="attempt_amount_within_limit"),
        ]
        indexes = [
            models.Index(fields=["status", "expires_at"], name="attempt_status_expiry"),
            models.Index(fields=["merchant_id", "status"], name="attempt_merchant_status"),
        ]

    def __str__(self) -> str:
        return f"{self.code} ({self.status})"


class Refund(BaseModel):
    """Money given back on a paid transaction, through the provider (the channel) of the attempt that
    collected it. `code` is sent to the provider as the refund's reference: random, unique."""

    class Status(models.TextChoices):
        PENDING = "PENDING"  # asked of the provider (or, SYSTEM, waiting for the cashier's confirmation)
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"

    transaction = models.ForeignKey(PaymentTransaction, on_delete=models.PROTECT, related_name="refunds")
    attempt = models.ForeignKey(PaymentAttempt, on_delete=models.PROTECT, related_name="refunds")
    merchant_id = models.BigIntegerField()
    channel = models.CharField(max_length=16, choices=Channel.choices)
    code = models.CharField(max_length=64, unique=True)
    amount = models.BigIntegerField()  # minor units of `currency`
    tax_amount = models.BigIntegerField(default=0)  # the tax included in `amount`
    currency = models.CharField(max_length=3)  # the transaction's
    reason = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    provider_reference = models.CharField(max_length=128, blank=True, default="")
    failure_reason = models.CharField(max_length=255, blank=True, default="")
    requested_by = models.BigIntegerField(null=True, blank=True)  # the user; null for a platform service
    # [{"lineId", "variantId", "quantity", "restock", "locationId"}] (contract REFUND_LINE)
    lines = models.JSONField(default=list, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)  # the provider took the request (accepted or answered)
    succeeded_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)

    class Meta(BaseModel.Meta):
        db_table = "payment_refund"
        ordering = ("-created_at", "-id")
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0, amount__lte=MAX_AMOUNT), name="refund_amount_positive_within_limit"),
            models.CheckConstraint(condition=Q(tax_amount__gte=0, tax_amount__lte=F("amount")), name="refund_tax_within_amount"),
        ]
        indexes = [
            models.Index(fields=["merchant_id", "status"], name="refund_merchant_status"),
            models.Index(fields=["status", "created_at"], name="refund_status_created"),
        ]

    def __str__(self) -> str:
        return f"{self.code} {self.amount} {self.currency} ({self.status})"


class WebhookConfig(OwnedModel):
    """A merchant's subscription to payment events, delivered signed (Standard Webhooks)."""

    class Status(models.TextChoices):
        ACTIVE = "ACTIVE"
        INACTIVE = "INACTIVE"

    class SigningMethod(models.TextChoices):
        HMAC_SHA256 = "HMAC_SHA256"

    SECRET_PURPOSE = "payment-webhook-secret"

    merchant_id = models.BigIntegerField()
    name = models.CharField(max_length=200)
    url = models.URLField(max_length=2000)
    event_types = models.JSONField(default=list)  # event names without the `pay:` prefix
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    signing_method = models.CharField(max_length=16, choices=SigningMethod.choices, default=SigningMethod.HMAC_SHA256)
    metadata = models.JSONField(default=dict, blank=True)  # {"maxRetries": int}
    secret = models.TextField(editable=False)  # sealed (AES-256-GCM) `whsec_...`; shown once at creation
    # Made by a platform service (HTTP Basic), e.g. commerce's sale side: its URL may be on the
    # platform's private network. A merchant's webhook (JWT) never may (the SSRF guard).
    internal = models.BooleanField(default=False, editable=False)

    class Meta(OwnedModel.Meta):
        db_table = "webhook_config"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["merchant_id", "status"], name="webhook_merchant_status")]

    def __str__(self) -> str:
        return self.name


class WebhookDelivery(BaseModel):
    """One event for one webhook: its tries (the delivery log) and where it stands."""

    class Status(models.TextChoices):
        PENDING = "PENDING"
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"

    webhook = models.ForeignKey(WebhookConfig, on_delete=models.PROTECT, related_name="deliveries")
    merchant_id = models.BigIntegerField()
    message_id = models.CharField(max_length=64)  # webhook-id: the same for every try and redelivery
    event_type = models.CharField(max_length=64)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.IntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=255, blank=True, default="")
    log = models.JSONField(default=list)  # [{"at", "statusCode", "error", "latencyMs"}]

    class Meta(BaseModel.Meta):
        db_table = "webhook_delivery"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]

    def __str__(self) -> str:
        return f"{self.event_type} -> {self.webhook_id} ({self.status})"


class OutboxMessage(OutboxMessageBase): ...


class IdempotencyKey(IdempotencyKeyBase):
    """A REST `Idempotency-Key` of a creating POST (merchant_platform/idempotency.py)."""

    class Meta(IdempotencyKeyBase.Meta):
        db_table = "payment_idempotency_key"
