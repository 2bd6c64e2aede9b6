"""JSON shapes of payment: camelCase names, ids as strings, amounts in minor units beside their
currency (docs/architecture.md section 10)."""

from __future__ import annotations

from django.core.validators import RegexValidator
from rest_framework import serializers

from apps.payment.models import Channel, PaymentAttempt, PaymentTransaction, Refund, WebhookConfig, WebhookDelivery
from merchant_platform.money import MAX_QUANTITY
from merchant_platform.serializers import BaseModelSerializer, BaseSerializer, SnowflakeField, StrictCharField

MAX_LINES = 500


class AttemptSerializer(BaseModelSerializer):
    transactionId = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    providerReference = serializers.CharField(read_only=True)
    qrPayload = serializers.CharField(read_only=True)
    bankCode = serializers.CharField(read_only=True)
    failureReason = serializers.CharField(read_only=True)
    expiresAt = serializers.DateTimeField(read_only=True)
    sentAt = serializers.DateTimeField(read_only=True)
    paidAt = serializers.DateTimeField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = PaymentAttempt
        fields = [
            "id",
            "transactionId",
            "merchantId",
            "channel",
            "code",
            "amount",
            "status",
            "providerReference",
            "qrPayload",
            "bankCode",
            "failureReason",
            "expiresAt",
            "sentAt",
            "paidAt",
            "createdAt",
            "updatedAt",
        ]
        read_only_fields = fields


# sourceId and lineId: what inventory accepts as order and line ids.
TOKEN = RegexValidator(r"^[A-Za-z0-9._:-]{1,64}$", "1 to 64 of A-Z a-z 0-9 . _ : -")


class LineSerializer(BaseSerializer):
    """An order line, passed on to inventory in payment.success (docs/events.md)."""

    snake_case_sources = False

    lineId = StrictCharField(max_length=64, validators=[TOKEN], required=False)
    variantId = SnowflakeField()
    quantity = serializers.IntegerField(min_value=1, max_value=MAX_QUANTITY)
    locationId = SnowflakeField(required=False)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        line = {"variantId": str(value["variantId"]), "quantity": value["quantity"]}
        if "lineId" in value:
            line["lineId"] = value["lineId"]
        if "locationId" in value:
            line["locationId"] = str(value["locationId"])
        return line


def numbered_lines(lines: list[dict]) -> list[dict]:
    """Lines with a lineId each (their position, from 1, when the sale side gave none), ids unique."""
    numbered = [{"lineId": line.get("lineId") or str(index), **line} for index, line in enumerate(lines, start=1)]
    ids = [line["lineId"] for line in numbered]
    if len(set(ids)) != len(ids):
        raise serializers.ValidationError({"lines": "Each lineId may appear once."})
    return numbered


class TaxAmountField(serializers.IntegerField):
    """The tax included in a transaction's amount: a JSON integer from 0 (not a string, a float or a
    boolean); at most the amount (services)."""

    default_error_messages = {"invalid": "Give a whole, non-negative number of minor units (a JSON integer)."}

    def __init__(self, **kwargs):
        super().__init__(min_value=0, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class TransactionSerializer(BaseModelSerializer):
    merchantId = SnowflakeField(read_only=True)
    sourceType = serializers.CharField(read_only=True)
    sourceId = serializers.CharField(read_only=True)
    paidAmount = serializers.IntegerField(read_only=True)
    refundedAmount = serializers.IntegerField(read_only=True, help_text="The sum of the transaction's SUCCEEDED refunds.")
    taxAmount = serializers.IntegerField(read_only=True, allow_null=True)
    financeAccountId = SnowflakeField(read_only=True, allow_null=True)
    lines = LineSerializer(many=True, read_only=True)
    attempts = serializers.SerializerMethodField()
    settledAt = serializers.DateTimeField(read_only=True)
    cancelledAt = serializers.DateTimeField(read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = PaymentTransaction
        fields = [
            "id",
            "merchantId",
            "sourceType",
            "sourceId",
            "amount",
            "paidAmount",
            "refundedAmount",
            "taxAmount",
            "currency",
            "financeAccountId",
            "lines",
            "description",
            "status",
            "attempts",
            "settledAt",
            "cancelledAt",
            "createdBy",
            "createdAt",
            "updatedAt",
        ]
        read_only_fields = fields

    def get_attempts(self, txn) -> list[dict]:
        return AttemptSerializer(txn.attempts.all(), many=True).data  # prefetched, in creation order


class TransactionCreateSerializer(BaseSerializer):
    merchantId = SnowflakeField()
    sourceId = StrictCharField(max_length=64, validators=[TOKEN])
    amount = serializers.IntegerField(min_value=1)  # at most MAX_AMOUNT: services answer AMOUNT_TOO_LARGE
    taxAmount = TaxAmountField(required=False, allow_null=True, help_text="The tax included in amount.")
    currency = serializers.RegexField(r"^[A-Z]{3}$", max_length=3)
    channel = serializers.ChoiceField(choices=Channel.choices, default=Channel.QR)
    financeAccountId = SnowflakeField(required=False, allow_null=True)
    lines = LineSerializer(many=True, required=False, max_length=MAX_LINES)
    description = StrictCharField(max_length=255, required=False, allow_blank=True)

    def validate_lines(self, lines):
        return numbered_lines(lines)


class AttemptCreateSerializer(BaseSerializer):
    channel = serializers.ChoiceField(choices=Channel.choices)
    amount = serializers.IntegerField(min_value=1, required=False)  # at most MAX_AMOUNT (services)


class RefundLineSerializer(BaseSerializer):
    """A refunded line of a sale order: the transaction's lineId and variant, how many, and whether
    the goods come back on hand (at `locationId`, or where they left)."""

    snake_case_sources = False

    lineId = StrictCharField(max_length=64, validators=[TOKEN])
    variantId = SnowflakeField()
    quantity = serializers.IntegerField(min_value=1, max_value=MAX_QUANTITY)
    restock = serializers.BooleanField(default=False)
    locationId = SnowflakeField(required=False, allow_null=True)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        location = value.get("locationId")
        return {
            "lineId": value["lineId"],
            "variantId": str(value["variantId"]),
            "quantity": value["quantity"],
            "restock": value["restock"],
            "locationId": None if location is None else str(location),
        }


class RefundCreateSerializer(BaseSerializer):
    merchantId = SnowflakeField(required=False, help_text="The transaction's merchant; required of a platform service.")
    amount = serializers.IntegerField(min_value=1)  # at most MAX_AMOUNT: services answer AMOUNT_TOO_LARGE
    taxAmount = TaxAmountField(
        required=False,
        help_text="The tax included in amount; by default the transaction's tax prorated (all of what is left on the last refund).",
    )
    currency = serializers.RegexField(r"^[A-Z]{3}$", max_length=3)
    reason = StrictCharField(min_length=1, max_length=255)
    lines = RefundLineSerializer(many=True, required=False, max_length=MAX_LINES)


class RefundSerializer(BaseModelSerializer):
    """A refund (the PAYMENT_REFUND shape of its events, with its channel, attempt and updatedAt)."""

    transactionId = SnowflakeField(read_only=True)
    attemptId = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    sourceType = serializers.CharField(source="transaction.source_type", read_only=True)
    sourceId = serializers.CharField(source="transaction.source_id", read_only=True)
    financeAccountId = SnowflakeField(source="transaction.finance_account_id", read_only=True, allow_null=True)
    taxAmount = serializers.IntegerField(read_only=True)
    providerReference = serializers.CharField(read_only=True)
    failureReason = serializers.CharField(read_only=True)
    requestedBy = SnowflakeField(read_only=True, allow_null=True)
    lines = RefundLineSerializer(many=True, read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    succeededAt = serializers.DateTimeField(read_only=True)
    failedAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = Refund
        fields = [
            "id",
            "transactionId",
            "attemptId",
            "merchantId",
            "sourceType",
            "sourceId",
            "financeAccountId",
            "channel",
            "amount",
            "taxAmount",
            "currency",
            "reason",
            "status",
            "providerReference",
            "failureReason",
            "requestedBy",
            "lines",
            "createdAt",
            "succeededAt",
            "failedAt",
            "updatedAt",
        ]
        read_only_fields = fields


class RefundConfirmSerializer(BaseSerializer):
    reference = StrictCharField(
        max_length=128, required=False, allow_blank=True, help_text="The till's receipt, kept as providerReference."
    )


class RefundFailSerializer(BaseSerializer):
    reason = StrictCharField(max_length=255, required=False, allow_blank=True)


class WebhookMetadataSerializer(BaseSerializer):
    snake_case_sources = False

    maxRetries = serializers.IntegerField(min_value=0, max_value=20, required=False)


class WebhookSerializer(BaseModelSerializer):
    merchantId = SnowflakeField(read_only=True)
    eventTypes = serializers.ListField(child=serializers.CharField(), read_only=True)
    signingMethod = serializers.CharField(read_only=True)
    metadata = serializers.DictField(read_only=True)
    internal = serializers.BooleanField(read_only=True, help_text="Made by a platform service: its URL may be private.")
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = WebhookConfig
        fields = [
            "id",
            "merchantId",
            "name",
            "url",
            "eventTypes",
            "status",
            "signingMethod",
            "metadata",
            "internal",
            "createdBy",
            "createdAt",
            "updatedAt",
        ]
        read_only_fields = fields


class WebhookCreatedSerializer(WebhookSerializer):
    """The creation answer: the only one that carries the signing secret."""

    secret = serializers.SerializerMethodField()

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields

    def get_secret(self, config) -> str:
        return self.context["secret"]


def event_types_field(**kwargs) -> serializers.ListField:
    return serializers.ListField(source="event_types", child=StrictCharField(max_length=64), min_length=1, max_length=20, **kwargs)


class WebhookCreateSerializer(BaseSerializer):
    snake_case_sources = False

    merchantId = SnowflakeField(source="merchant_id")
    name = StrictCharField(max_length=200)
    url = serializers.URLField(max_length=2000)
    eventTypes = event_types_field()
    status = serializers.ChoiceField(choices=WebhookConfig.Status.choices, required=False)
    signingMethod = serializers.ChoiceField(choices=WebhookConfig.SigningMethod.choices, required=False, write_only=True)
    metadata = WebhookMetadataSerializer(required=False)

    def validate(self, attrs):
        attrs.pop("signingMethod", None)  # HMAC_SHA256 is the only method
        return attrs


class WebhookUpdateSerializer(BaseSerializer):
    name = StrictCharField(max_length=200, required=False)
    url = serializers.URLField(max_length=2000, required=False)
    eventTypes = event_types_field(required=False)
    status = serializers.ChoiceField(choices=WebhookConfig.Status.choices, required=False)
    metadata = WebhookMetadataSerializer(required=False)


class DeliverySerializer(BaseModelSerializer):
    webhookId = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    messageId = serializers.CharField(read_only=True)
    eventType = serializers.CharField(read_only=True)
    attemptCount = serializers.IntegerField(read_only=True)
    nextAttemptAt = serializers.DateTimeField(read_only=True)
    lastStatusCode = serializers.IntegerField(read_only=True)
    lastError = serializers.CharField(read_only=True)
    log = serializers.ListField(child=serializers.DictField(), read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "webhookId",
            "merchantId",
            "messageId",
            "eventType",
            "status",
            "attemptCount",
            "nextAttemptAt",
            "lastStatusCode",
            "lastError",
            "log",
            "payload",
            "createdAt",
            "updatedAt",
        ]
        read_only_fields = fields
