"""Sale order records (issue 20), in the sales sub-package of commerce: they are commerce's models
(app label `commerce`, apps/commerce/models.py imports them so Django registers them), in commerce's
schema, with their own tables.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from merchant_platform.models import OwnedModel, SnowflakeIdField
from merchant_platform.money import MAX_AMOUNT, MAX_QUANTITY


class SaleOrder(OwnedModel):
    """A sale (issue 20): lines priced from the catalog when ordered, taxed by taxation's quote when
    placed, paid through one payment transaction whose `sourceId` is this order's id. The state
    machine is in docs/services/commerce.md ("Sale orders"); apps/commerce/sales/services/ holds every move."""

    class Status(models.TextChoices):
        DRAFT = "DRAFT"  # editable, nothing held anywhere
        PLACED = "PLACED"  # stock reserved, tax quoted, payment transaction open
        PAID = "PAID"  # the payment transaction settled
        FULFILLED = "FULFILLED"  # handed over (final)
        CANCELLED = "CANCELLED"  # final; its reservation released, its payment cancelled
        EXPIRED = "EXPIRED"  # unpaid in time (final); its reservation released
        PARTIALLY_REFUNDED = "PARTIALLY_REFUNDED"  # paid, then part of it refunded (a SUCCEEDED SaleReturn)
        REFUNDED = "REFUNDED"  # every unit of every line refunded (final)

    merchant = models.ForeignKey("commerce.Merchant", on_delete=models.PROTECT, related_name="sale_orders")
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.DRAFT)
    currency = models.CharField(max_length=3)
    customer_name = models.CharField(max_length=200, blank=True)
    customer_email = models.EmailField(max_length=254, blank=True)
    customer_phone = models.CharField(max_length=32, blank=True)
    note = models.CharField(max_length=1000, blank=True)
    # The finance account the payment settles to (spec 2.1: chosen by the sale side); finance
    # skips the SALE voucher of a payment without one.
    finance_account_id = models.BigIntegerField(null=True, blank=True)
    payment_channel = models.CharField(max_length=16, default="QR")
    net_amount = models.BigIntegerField(default=0)
    tax_amount = models.BigIntegerField(null=True, blank=True)  # known once placed
    gross_amount = models.BigIntegerField(null=True, blank=True)
    tax_quote = models.JSONField(null=True, blank=True)  # taxation's answer, as placed
    # The reference of the current placement at inventory (reservation orderId) and payment
    # (`sourceId`): the order id, then `<id>-<n>` for the n-th placement after a failed one was
    # undone (inventory and payment keep a reference forever, so a fresh try needs a fresh one).
    placement_attempt = models.PositiveIntegerField(default=0)
    placement_reference = models.CharField(max_length=64, blank=True)
    placement_undone = models.BooleanField(default=False)  # the last try failed and was undone
    payment_transaction_id = models.BigIntegerField(null=True, blank=True)
    payment = models.JSONField(null=True, blank=True)  # the transaction as payment answered (QR payload...)
    reservation_released_at = models.DateTimeField(null=True, blank=True)  # set once inventory confirmed the release
    placed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)  # a PLACED order unpaid by then expires
    paid_at = models.DateTimeField(null=True, blank=True)
    fulfilled_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    closing_reason = models.CharField(max_length=64, blank=True)  # why it was cancelled or expired
    # The gross and the tax its SUCCEEDED returns gave back (the returns hold the detail).
    refunded_amount = models.BigIntegerField(default=0)
    refunded_tax_amount = models.BigIntegerField(default=0)
    refunded_at = models.DateTimeField(null=True, blank=True)  # the last refund that succeeded

    class Meta(OwnedModel.Meta):
        db_table = "sale_order"
        ordering = ("-created_at", "-id")
        indexes = [
            models.Index(fields=["merchant", "status"], name="sale_order_merchant_status"),
            models.Index(fields=["expires_at"], condition=Q(status="PLACED"), name="sale_order_placed_expiry"),
            models.Index(fields=["merchant", "placement_reference"], name="sale_order_reference"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(net_amount__gte=0), name="sale_order_net_not_negative"),
            models.CheckConstraint(
                condition=Q(net_amount__lte=MAX_AMOUNT)
                & (Q(tax_amount__isnull=True) | Q(tax_amount__gte=0, tax_amount__lte=MAX_AMOUNT))
                & (Q(gross_amount__isnull=True) | Q(gross_amount__gte=0, gross_amount__lte=MAX_AMOUNT)),
                name="sale_order_amounts_within_max",
            ),
            models.CheckConstraint(
                condition=Q(refunded_tax_amount__gte=0, refunded_tax_amount__lte=F("refunded_amount"))
                & (Q(refunded_amount=0) | Q(refunded_amount__lte=F("gross_amount"))),
                name="sale_order_refunded_within_gross",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


class SaleOrderLine(models.Model):
    """One line of a sale order: the variant and its catalog price when the line was added, and its
    tax once the order is placed. `line_number` is the line's id at inventory and payment."""

    id = SnowflakeIdField(primary_key=True)
    order = models.ForeignKey(SaleOrder, on_delete=models.CASCADE, related_name="lines")
    line_number = models.PositiveIntegerField()
    variant_id = models.BigIntegerField()
    product_id = models.BigIntegerField()
    tax_group_id = models.BigIntegerField(null=True, blank=True)
    sku = models.CharField(max_length=64)
    name = models.CharField(max_length=200, blank=True)
    quantity = models.PositiveIntegerField()
    unit_price_amount = models.BigIntegerField()
    net_amount = models.BigIntegerField()
    tax_amount = models.BigIntegerField(null=True, blank=True)
    gross_amount = models.BigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "sale_order_line"
        ordering = ("order_id", "line_number")
        constraints = [
            models.UniqueConstraint(fields=["order", "line_number"], name="sale_order_line_number_unique"),
            models.CheckConstraint(condition=Q(quantity__gte=1) & Q(unit_price_amount__gte=0), name="sale_order_line_positive"),
            models.CheckConstraint(
                condition=Q(quantity__lte=MAX_QUANTITY, unit_price_amount__lte=MAX_AMOUNT, net_amount__gte=0, net_amount__lte=MAX_AMOUNT)
                & (Q(tax_amount__isnull=True) | Q(tax_amount__gte=0, tax_amount__lte=MAX_AMOUNT))
                & (Q(gross_amount__isnull=True) | Q(gross_amount__gte=0, gross_amount__lte=MAX_AMOUNT)),
                name="sale_order_line_amounts_within_max",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.order_id}/{self.line_number} {self.sku} x{self.quantity}"


class PaymentSubscription(models.Model):
    """Commerce's webhook subscription at payment for one merchant (a WebhookConfig there): the
    signing secret payment gave when it was made, sealed (AES-256-GCM, bound to the merchant), and
    the event types it asks for (empty for a subscription made before refunds: settlements only)."""

    merchant = models.OneToOneField("commerce.Merchant", on_delete=models.PROTECT, primary_key=True, related_name="payment_subscription")
    webhook_id = models.BigIntegerField()
    sealed_secret = models.TextField()
    event_types = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "payment_subscription"

    def __str__(self) -> str:
        return f"{self.merchant_id} -> webhook {self.webhook_id}"


class PaymentWebhookReceipt(models.Model):
    """A payment webhook commerce acted on, by its `webhook-id`: a redelivery finds it and does nothing."""

    message_id = models.CharField(max_length=255, primary_key=True)
    event_type = models.CharField(max_length=64)
    order_id = models.BigIntegerField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "payment_webhook_receipt"

    def __str__(self) -> str:
        return f"{self.message_id} {self.event_type}"


class UnmatchedSettlement(models.Model):
    """A payment settlement commerce did not apply: it names no order placed with that transaction
    for this merchant, or its merchant, reference, amount, currency or state do not match the order,
    or the order no longer awaits payment. Money may have moved without a sale: an operator
    reconciles it (a refund, or a match by hand). The values are the webhook's, as sent."""

    class Reason(models.TextChoices):
        UNKNOWN_TRANSACTION = "UNKNOWN_TRANSACTION"  # no order of this merchant was placed with this transaction
        OTHER_MERCHANT = "OTHER_MERCHANT"  # the transaction is another merchant's than the webhook's
        OTHER_REFERENCE = "OTHER_REFERENCE"  # its sourceId is not the order's placement reference
        AMOUNT_MISMATCH = "AMOUNT_MISMATCH"  # not the order's gross
        CURRENCY_MISMATCH = "CURRENCY_MISMATCH"
        NOT_SETTLED = "NOT_SETTLED"  # the transaction it carries is not SETTLED
        NOT_AWAITING_PAYMENT = "NOT_AWAITING_PAYMENT"  # the order is not PLACED (a draft, cancelled, expired)

    message_id = models.CharField(max_length=255, primary_key=True)  # the webhook-id
    merchant_id = models.BigIntegerField(db_index=True)  # the merchant the webhook was signed for
    reason = models.CharField(max_length=32, choices=Reason.choices)
    transaction_id = models.CharField(max_length=64, blank=True)
    source_id = models.CharField(max_length=255, blank=True)
    amount = models.CharField(max_length=64, blank=True)  # as sent: it may be anything
    currency = models.CharField(max_length=16, blank=True)
    order_id = models.BigIntegerField(null=True, blank=True)  # the order it named, when there is one
    payload = models.JSONField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "unmatched_settlement"
        ordering = ("-received_at",)

    def __str__(self) -> str:
        return f"{self.message_id} {self.reason}"


class SaleReturn(OwnedModel):
    """One refund of a paid sale order (issue 33): the lines and quantities given back, their amounts
    (computed from the order's own lines, cumulative rounding per line), and the refund at payment
    (`payment_refund_id`; its Idempotency-Key there is this record's id). PENDING -> SUCCEEDED |
    FAILED; a FAILED return frees its quantities. `created_by` is the user who asked (null for a
    service or an operator in the admin)."""

    class Status(models.TextChoices):
        PENDING = "PENDING"  # recorded; payment has not told the outcome yet
        SUCCEEDED = "SUCCEEDED"  # the money went back (final)
        FAILED = "FAILED"  # payment refused or the provider failed it (final); its quantities are free again

    merchant = models.ForeignKey("commerce.Merchant", on_delete=models.PROTECT, related_name="sale_returns")
    order = models.ForeignKey(SaleOrder, on_delete=models.PROTECT, related_name="returns")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    reason = models.CharField(max_length=255)
    currency = models.CharField(max_length=3)
    net_amount = models.BigIntegerField()
    tax_amount = models.BigIntegerField()
    gross_amount = models.BigIntegerField()  # what payment is asked to give back
    payment_refund_id = models.BigIntegerField(null=True, blank=True)
    payment_refund = models.JSONField(null=True, blank=True)  # the refund as payment last told it
    failure_reason = models.CharField(max_length=255, blank=True)  # payment's code or the provider's reason
    submitted_at = models.DateTimeField(null=True, blank=True)  # payment answered the refund request
    succeeded_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)

    class Meta(OwnedModel.Meta):
        db_table = "sale_return"
        ordering = ("-created_at", "-id")
        indexes = [
            models.Index(fields=["merchant", "status"], name="sale_return_merchant_status"),
            models.Index(fields=["created_at"], condition=Q(status="PENDING"), name="sale_return_pending"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["payment_refund_id"], name="sale_return_payment_refund_unique"),
            models.CheckConstraint(
                condition=Q(gross_amount__gte=1, gross_amount__lte=MAX_AMOUNT, tax_amount__gte=0, net_amount__gte=0)
                & Q(net_amount=F("gross_amount") - F("tax_amount")),
                name="sale_return_amounts_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"return {self.id} of {self.order_id} ({self.status})"


class SaleReturnLine(models.Model):
    """A line of a return: how many units of an order line, whether they come back on hand (and
    where: `location_id` at inventory, or the location the sale took them from), and the part of
    the line's net, tax and gross they give back."""

    id = SnowflakeIdField(primary_key=True)
    sale_return = models.ForeignKey(SaleReturn, on_delete=models.CASCADE, related_name="lines")
    order_line = models.ForeignKey(SaleOrderLine, on_delete=models.PROTECT, related_name="return_lines")
    quantity = models.PositiveIntegerField()
    restock = models.BooleanField(default=True)
    location_id = models.BigIntegerField(null=True, blank=True)
    net_amount = models.BigIntegerField()
    tax_amount = models.BigIntegerField()
    gross_amount = models.BigIntegerField()

    class Meta:
        db_table = "sale_return_line"
        ordering = ("sale_return_id", "order_line_id")
        constraints = [
            models.UniqueConstraint(fields=["sale_return", "order_line"], name="sale_return_line_once"),
            models.CheckConstraint(
                condition=Q(quantity__gte=1, quantity__lte=MAX_QUANTITY, tax_amount__gte=0, net_amount__gte=0)
                & Q(net_amount=F("gross_amount") - F("tax_amount")),
                name="sale_return_line_amounts_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sale_return_id}/{self.order_line_id} x{self.quantity}"


class UnmatchedRefund(models.Model):
    """A refund outcome payment reported that commerce did not apply: it names no return of an order
    this merchant placed with that transaction, or its merchant, reference, amounts, currency or
    state do not match the return, or the return already ended the other way. Kept for an
    operator to reconcile. The values are the webhook's, as sent."""

    class Reason(models.TextChoices):
        UNKNOWN_TRANSACTION = "UNKNOWN_TRANSACTION"  # no order of this merchant was placed with this transaction
        OTHER_MERCHANT = "OTHER_MERCHANT"  # the refund or its transaction is another merchant's than the webhook's
        OTHER_REFERENCE = "OTHER_REFERENCE"  # its sourceId is not the order's placement reference
        UNKNOWN_REFUND = "UNKNOWN_REFUND"  # no return of the order was submitted as this refund
        AMOUNT_MISMATCH = "AMOUNT_MISMATCH"  # not the return's gross or tax
        CURRENCY_MISMATCH = "CURRENCY_MISMATCH"
        STATUS_MISMATCH = "STATUS_MISMATCH"  # the refund it carries is not in the state the event names
        CONFLICTING_OUTCOME = "CONFLICTING_OUTCOME"  # the return already ended the other way

    message_id = models.CharField(max_length=255, primary_key=True)  # the webhook-id
    merchant_id = models.BigIntegerField(db_index=True)  # the merchant the webhook was signed for
    event_type = models.CharField(max_length=64)
    reason = models.CharField(max_length=32, choices=Reason.choices)
    refund_id = models.CharField(max_length=64, blank=True)
    transaction_id = models.CharField(max_length=64, blank=True)
    source_id = models.CharField(max_length=255, blank=True)
    amount = models.CharField(max_length=64, blank=True)  # as sent: it may be anything
    currency = models.CharField(max_length=16, blank=True)
    order_id = models.BigIntegerField(null=True, blank=True)  # the order it named, when there is one
    return_id = models.BigIntegerField(null=True, blank=True)  # the return it named, when there is one
    payload = models.JSONField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "unmatched_refund"
        ordering = ("-received_at",)

    def __str__(self) -> str:
        return f"{self.message_id} {self.reason}"
