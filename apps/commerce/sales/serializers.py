"""JSON shapes of sale orders (camelCase, ids as strings, money as integer minor units)."""

from __future__ import annotations

from rest_framework import serializers

from apps.commerce.sales.models import SaleOrder, SaleReturn
from apps.commerce.sales.services import CHANNELS
from apps.commerce.serializers import currency_field
from merchant_platform.money import MAX_QUANTITY
from merchant_platform.serializers import BaseSerializer, SnowflakeField, StrictCharField, single_line


class LineInputSerializer(BaseSerializer):
    variantId = SnowflakeField()
    quantity = serializers.IntegerField(min_value=1, max_value=MAX_QUANTITY)


class SaleOrderUpdateSerializer(BaseSerializer):
    """Validates to the keyword arguments of sales.services.order_update (a DRAFT only)."""

    lines = LineInputSerializer(many=True, required=False, help_text="Replaces every line (re-priced from the catalog).")
    customerName = StrictCharField(max_length=200, validators=[single_line], required=False, allow_blank=True)
    customerEmail = serializers.EmailField(max_length=254, required=False, allow_blank=True)
    customerPhone = StrictCharField(max_length=32, required=False, allow_blank=True)
    note = StrictCharField(max_length=1000, required=False, allow_blank=True)
    financeAccountId = SnowflakeField(required=False, allow_null=True, help_text="The finance account the payment settles to.")
    paymentChannel = serializers.ChoiceField(choices=CHANNELS, required=False)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class SaleOrderCreateSerializer(SaleOrderUpdateSerializer):
    """Validates to the keyword arguments of sales.services.order_create."""

    merchantId = SnowflakeField()
    currency = currency_field(required=False, help_text="The merchant's default currency when absent.")
    lines = LineInputSerializer(many=True, allow_empty=False)

    def __init__(self, *args, **kwargs):
        kwargs["partial"] = False
        super().__init__(*args, **kwargs)


class RefundLineInputSerializer(BaseSerializer):
    lineId = StrictCharField(max_length=16, help_text="The order line's `lineId`, as the order shows it.")
    quantity = serializers.IntegerField(min_value=1, max_value=MAX_QUANTITY)
    restock = serializers.BooleanField(help_text="Whether the units come back on hand at inventory.")
    locationId = SnowflakeField(
        required=False, allow_null=True, help_text="Where they come back (the merchant's); default: where the sale took them from."
    )


class SaleOrderRefundSerializer(BaseSerializer):
    """Validates to the keyword arguments of sales.services.order_refund."""

    lines = RefundLineInputSerializer(many=True, allow_empty=False, max_length=500)
    reason = StrictCharField(max_length=255, validators=[single_line])


class SaleReturnLineSerializer(BaseSerializer):
    lineId = serializers.CharField(source="order_line.line_number", read_only=True)
    variantId = SnowflakeField(source="order_line.variant_id", read_only=True)
    quantity = serializers.IntegerField(read_only=True)
    restock = serializers.BooleanField(read_only=True)
    locationId = SnowflakeField(read_only=True, allow_null=True)
    netAmount = serializers.IntegerField(read_only=True)
    taxAmount = serializers.IntegerField(read_only=True)
    grossAmount = serializers.IntegerField(read_only=True)


class SaleReturnSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    orderId = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    status = serializers.ChoiceField(choices=SaleReturn.Status.choices, read_only=True)
    reason = serializers.CharField(read_only=True)
    currency = serializers.CharField(read_only=True)
    netAmount = serializers.IntegerField(read_only=True)
    taxAmount = serializers.IntegerField(read_only=True)
    grossAmount = serializers.IntegerField(read_only=True, help_text="What payment gives back.")
    lines = SaleReturnLineSerializer(many=True, read_only=True)
    paymentRefundId = SnowflakeField(read_only=True, allow_null=True, help_text="The refund at payment, once it answered.")
    failureReason = serializers.CharField(read_only=True, help_text="Payment's refusal code or the provider's reason, when FAILED.")
    createdBy = SnowflakeField(read_only=True, allow_null=True, help_text="Who asked (null: a service or an operator).")
    createdAt = serializers.DateTimeField(read_only=True)
    submittedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    succeededAt = serializers.DateTimeField(read_only=True, allow_null=True)
    failedAt = serializers.DateTimeField(read_only=True, allow_null=True)


class SaleOrderLineSerializer(BaseSerializer):
    lineId = serializers.CharField(source="line_number", read_only=True)
    variantId = SnowflakeField(read_only=True)
    productId = SnowflakeField(read_only=True)
    sku = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    quantity = serializers.IntegerField(read_only=True)
    unitPriceAmount = serializers.IntegerField(read_only=True)
    netAmount = serializers.IntegerField(read_only=True)
    taxAmount = serializers.IntegerField(read_only=True, allow_null=True)
    grossAmount = serializers.IntegerField(read_only=True, allow_null=True)


class SaleOrderSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    status = serializers.ChoiceField(choices=SaleOrder.Status.choices, read_only=True)
    currency = serializers.CharField(read_only=True)
    customerName = serializers.CharField(read_only=True)
    customerEmail = serializers.CharField(read_only=True)
    customerPhone = serializers.CharField(read_only=True)
    note = serializers.CharField(read_only=True)
    financeAccountId = SnowflakeField(read_only=True, allow_null=True)
    paymentChannel = serializers.CharField(read_only=True)
    netAmount = serializers.IntegerField(read_only=True)
    taxAmount = serializers.IntegerField(read_only=True, allow_null=True)
    grossAmount = serializers.IntegerField(read_only=True, allow_null=True)
    lines = SaleOrderLineSerializer(many=True, read_only=True)
    placementReference = serializers.CharField(
        read_only=True, help_text="The reservation orderId at inventory and the sourceId at payment."
    )
    paymentTransactionId = SnowflakeField(read_only=True, allow_null=True)
    payment = serializers.DictField(read_only=True, allow_null=True, help_text="The payment transaction as placed (attempts, QR payload).")
    closingReason = serializers.CharField(read_only=True)
    placedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    expiresAt = serializers.DateTimeField(read_only=True, allow_null=True)
    paidAt = serializers.DateTimeField(read_only=True, allow_null=True)
    fulfilledAt = serializers.DateTimeField(read_only=True, allow_null=True)
    cancelledAt = serializers.DateTimeField(read_only=True, allow_null=True)
    expiredAt = serializers.DateTimeField(read_only=True, allow_null=True)
    refundedAmount = serializers.IntegerField(read_only=True, help_text="The gross its SUCCEEDED returns gave back.")
    refundedTaxAmount = serializers.IntegerField(read_only=True)
    refundedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    returns = SaleReturnSerializer(many=True, read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)
