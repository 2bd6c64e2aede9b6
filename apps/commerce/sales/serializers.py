"""JSON shapes of sale orders (camelCase, ids as strings, money as integer minor units)."""

from __future__ import annotations

from rest_framework import serializers

from apps.commerce.sales.models import SaleOrder
from apps.commerce.sales.services import CHANNELS
from apps.commerce.serializers import currency_field
from merchant_platform.money import MAX_QUANTITY
from merchant_platform.serializers import BaseSerializer, SnowflakeField, StrictCharField, single_line


class LineInputSerializer(BaseSerializer):
    variantId = SnowflakeField(source="variant_id")
    quantity = serializers.IntegerField(min_value=1, max_value=MAX_QUANTITY)


class SaleOrderUpdateSerializer(BaseSerializer):
    """Validates to the keyword arguments of sales.services.order_update (a DRAFT only)."""

    lines = LineInputSerializer(many=True, required=False, help_text="Replaces every line (re-priced from the catalog).")
    customerName = StrictCharField(source="customer_name", max_length=200, validators=[single_line], required=False, allow_blank=True)
    customerEmail = serializers.EmailField(source="customer_email", max_length=254, required=False, allow_blank=True)
    customerPhone = StrictCharField(source="customer_phone", max_length=32, required=False, allow_blank=True)
    note = StrictCharField(max_length=1000, required=False, allow_blank=True)
    financeAccountId = SnowflakeField(
        source="finance_account_id", required=False, allow_null=True, help_text="The finance account the payment settles to."
    )
    paymentChannel = serializers.ChoiceField(source="payment_channel", choices=CHANNELS, required=False)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class SaleOrderCreateSerializer(SaleOrderUpdateSerializer):
    """Validates to the keyword arguments of sales.services.order_create."""

    merchantId = SnowflakeField(source="merchant_id")
    currency = currency_field(required=False, help_text="The merchant's default currency when absent.")
    lines = LineInputSerializer(many=True, allow_empty=False)

    def __init__(self, *args, **kwargs):
        kwargs["partial"] = False
        super().__init__(*args, **kwargs)


class SaleOrderLineSerializer(BaseSerializer):
    lineId = serializers.CharField(source="line_number", read_only=True)
    variantId = SnowflakeField(source="variant_id", read_only=True)
    productId = SnowflakeField(source="product_id", read_only=True)
    sku = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    quantity = serializers.IntegerField(read_only=True)
    unitPriceAmount = serializers.IntegerField(source="unit_price_amount", read_only=True)
    netAmount = serializers.IntegerField(source="net_amount", read_only=True)
    taxAmount = serializers.IntegerField(source="tax_amount", read_only=True, allow_null=True)
    grossAmount = serializers.IntegerField(source="gross_amount", read_only=True, allow_null=True)


class SaleOrderSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(source="merchant_id", read_only=True)
    status = serializers.ChoiceField(choices=SaleOrder.Status.choices, read_only=True)
    currency = serializers.CharField(read_only=True)
    customerName = serializers.CharField(source="customer_name", read_only=True)
    customerEmail = serializers.CharField(source="customer_email", read_only=True)
    customerPhone = serializers.CharField(source="customer_phone", read_only=True)
    note = serializers.CharField(read_only=True)
    financeAccountId = SnowflakeField(source="finance_account_id", read_only=True, allow_null=True)
    paymentChannel = serializers.CharField(source="payment_channel", read_only=True)
    netAmount = serializers.IntegerField(source="net_amount", read_only=True)
    taxAmount = serializers.IntegerField(source="tax_amount", read_only=True, allow_null=True)
    grossAmount = serializers.IntegerField(source="gross_amount", read_only=True, allow_null=True)
    lines = SaleOrderLineSerializer(many=True, read_only=True)
    placementReference = serializers.CharField(
        source="placement_reference", read_only=True, help_text="The reservation orderId at inventory and the sourceId at payment."
    )
    paymentTransactionId = SnowflakeField(source="payment_transaction_id", read_only=True, allow_null=True)
    payment = serializers.DictField(read_only=True, allow_null=True, help_text="The payment transaction as placed (attempts, QR payload).")
    closingReason = serializers.CharField(source="closing_reason", read_only=True)
    placedAt = serializers.DateTimeField(source="placed_at", read_only=True, allow_null=True)
    expiresAt = serializers.DateTimeField(source="expires_at", read_only=True, allow_null=True)
    paidAt = serializers.DateTimeField(source="paid_at", read_only=True, allow_null=True)
    fulfilledAt = serializers.DateTimeField(source="fulfilled_at", read_only=True, allow_null=True)
    cancelledAt = serializers.DateTimeField(source="cancelled_at", read_only=True, allow_null=True)
    expiredAt = serializers.DateTimeField(source="expired_at", read_only=True, allow_null=True)
    createdBy = SnowflakeField(source="created_by", read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    updatedAt = serializers.DateTimeField(source="updated_at", read_only=True)
