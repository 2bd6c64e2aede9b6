"""JSON shapes of inventory: camelCase names, ids as strings, quantities as JSON integers, money as
integer minor units beside its currency. Input serializers validate to the keyword arguments of
the functions of apps/inventory/services/ (the snake_case of their names, or `source=`); output serializers
only read."""

from __future__ import annotations

import re

from django.core.validators import MaxValueValidator, RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.inventory.models import Item, PurchaseOrder, Reservation, Ticket
from apps.inventory.services import MAX_LINES
from merchant_platform.money import MAX_QUANTITY
from merchant_platform.serializers import BaseSerializer, SnowflakeField, StrictCharField, single_line

token = RegexValidator(r"^[A-Za-z0-9._:-]{1,64}$", "1 to 64 of letters, digits and . _ : -")


class QuantityField(serializers.IntegerField):
    """A whole number of units (a JSON integer, not a string, float or boolean)."""

    default_error_messages = {"invalid": "Give a whole number (a JSON integer)."}

    def __init__(self, *, min_value: int = 1, **kwargs):
        super().__init__(min_value=min_value, max_value=MAX_QUANTITY, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field({"type": "integer", "minimum": -MAX_QUANTITY, "maximum": MAX_QUANTITY, "not": {"enum": [0]}})
class DeltaField(QuantityField):
    def __init__(self, **kwargs):
        super().__init__(min_value=-MAX_QUANTITY, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value == 0:
            raise serializers.ValidationError("Give a non-zero change.")
        return value


class AmountField(QuantityField):
    """Minor units from 0. The upper limit (MAX_AMOUNT, on the amount and on quantity x amount) is
    the service's, answered 400 AMOUNT_TOO_LARGE."""

    default_error_messages = {"invalid": "Give a whole, non-negative number of minor units (a JSON integer)."}

    def __init__(self, **kwargs):
        super().__init__(min_value=0, **kwargs)
        self.max_value = None
        self.validators = [v for v in self.validators if not isinstance(v, MaxValueValidator)]


def _text(max_length: int = 200, **kwargs) -> StrictCharField:
    return StrictCharField(max_length=max_length, validators=[single_line], **kwargs)


def _token(**kwargs) -> StrictCharField:
    return StrictCharField(max_length=64, validators=[token], **kwargs)


# --- Locations and items --------------------------------------------------------------------------


class LocationSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    name = serializers.CharField(read_only=True)
    code = serializers.CharField(read_only=True)
    isDefault = serializers.BooleanField(read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class LocationUpdateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.location_update."""

    name = _text()
    code = _text(max_length=64, allow_blank=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("partial", True)
        super().__init__(*args, **kwargs)


class LocationCreateSerializer(LocationUpdateSerializer):
    merchantId = SnowflakeField()

    def __init__(self, *args, **kwargs):
        kwargs["partial"] = False
        super().__init__(*args, **kwargs)
        self.fields["code"].required = False


class ItemSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    variantId = SnowflakeField(read_only=True)
    productId = SnowflakeField(read_only=True, allow_null=True)
    sku = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=Item.Status.choices, read_only=True)
    allowOversell = serializers.BooleanField(read_only=True)
    currency = serializers.CharField(read_only=True)
    unitCostAmount = serializers.IntegerField(read_only=True, allow_null=True)
    costCurrency = serializers.CharField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class ItemUpdateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.item_update (the rest comes from commerce)."""

    allowOversell = serializers.BooleanField()


# --- Stock and tracking ---------------------------------------------------------------------------


class StockSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    inventoryItemId = SnowflakeField(source="item_id", read_only=True)
    locationId = SnowflakeField(read_only=True)
    quantityOnHand = serializers.IntegerField(read_only=True)
    reserved = serializers.IntegerField(read_only=True)
    available = serializers.IntegerField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class TrackingSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    inventoryItemId = SnowflakeField(source="item_id", read_only=True)
    locationId = SnowflakeField(read_only=True)
    stockId = SnowflakeField(read_only=True)
    operation = serializers.CharField(read_only=True)
    delta = serializers.IntegerField(read_only=True)
    reservedDelta = serializers.IntegerField(read_only=True)
    requested = serializers.IntegerField(read_only=True)
    quantityAfter = serializers.IntegerField(read_only=True)
    reservedAfter = serializers.IntegerField(read_only=True)
    referenceType = serializers.CharField(read_only=True)
    referenceId = serializers.CharField(read_only=True)
    referenceLine = serializers.CharField(read_only=True)
    note = serializers.CharField(read_only=True)
    reason = serializers.CharField(read_only=True)
    unitCostAmount = serializers.IntegerField(read_only=True, allow_null=True)
    costCurrency = serializers.CharField(read_only=True)
    returnedFromId = SnowflakeField(
        source="returned_from_id", read_only=True, allow_null=True, help_text="A RETURN: the DEDUCT row whose goods it brings back."
    )
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)


class AdjustmentSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.stock_adjust."""

    inventoryItemId = SnowflakeField(source="item_id")
    locationId = SnowflakeField(required=False, help_text="Default: the merchant's default location.")
    delta = DeltaField(help_text="Units added (positive) or removed (negative); not zero.")
    reason = _text(max_length=500)


# --- Reservations (internal) ----------------------------------------------------------------------


class ReservationLineSerializer(BaseSerializer):
    """A line names its item by `inventoryItemId` or by commerce's `variantId` (one of the two)."""

    lineId = _token()
    inventoryItemId = SnowflakeField(source="item_id", required=False)
    variantId = SnowflakeField(required=False)
    quantity = QuantityField()
    locationId = SnowflakeField(required=False)

    def validate(self, attrs):
        if ("item_id" in attrs) == ("variant_id" in attrs):
            raise serializers.ValidationError({"inventoryItemId": "Give inventoryItemId or variantId (one of the two)."})
        return attrs


class ReserveSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.reservation_reserve."""

    orderId = _token()
    merchantId = SnowflakeField()
    lines = ReservationLineSerializer(many=True, allow_empty=False)
    ttlSeconds = serializers.IntegerField(min_value=1, max_value=7 * 24 * 3600, required=False)


class ReleaseSerializer(BaseSerializer):
    orderId = _token()
    merchantId = SnowflakeField(required=False, help_text="The order's merchant; needed only when two merchants use the order id.")
    lineIds = serializers.ListField(child=_token(), required=False, allow_empty=False)


class CommitSerializer(BaseSerializer):
    orderId = _token()
    merchantId = SnowflakeField(required=False, help_text="The order's merchant; needed only when two merchants use the order id.")


class ReservationSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    orderId = serializers.CharField(read_only=True)
    lineId = serializers.CharField(read_only=True)
    inventoryItemId = SnowflakeField(source="item_id", read_only=True)
    locationId = SnowflakeField(read_only=True)
    quantity = serializers.IntegerField(read_only=True)
    status = serializers.ChoiceField(choices=Reservation.Status.choices, read_only=True)
    expiresAt = serializers.DateTimeField(read_only=True)


# --- Cycle counts ---------------------------------------------------------------------------------


class TicketSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    type = serializers.ChoiceField(choices=Ticket.Type.choices, read_only=True)
    status = serializers.ChoiceField(choices=Ticket.Status.choices, read_only=True)
    inventoryItemId = SnowflakeField(source="item_id", read_only=True)
    locationId = SnowflakeField(read_only=True)
    countedQuantity = serializers.IntegerField(read_only=True, allow_null=True)
    expectedQuantity = serializers.IntegerField(read_only=True, allow_null=True)
    difference = serializers.IntegerField(read_only=True, allow_null=True)
    note = serializers.CharField(read_only=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class TicketCreateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.ticket_create (type CYCLE_COUNT)."""

    type = serializers.ChoiceField(choices=Ticket.Type.choices, required=False)
    inventoryItemId = SnowflakeField(source="item_id")
    locationId = SnowflakeField(required=False)
    note = _text(max_length=500, required=False, allow_blank=True)


class TicketCountSerializer(BaseSerializer):
    countedQuantity = QuantityField(min_value=0)


# --- Purchase orders ------------------------------------------------------------------------------


class PurchaseOrderLineSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    inventoryItemId = SnowflakeField(source="item_id", read_only=True)
    quantityOrdered = serializers.IntegerField(read_only=True)
    quantityReceived = serializers.IntegerField(read_only=True)
    unitCostAmount = serializers.IntegerField(read_only=True)


class PurchaseOrderSerializer(BaseSerializer):
    id = SnowflakeField(read_only=True)
    merchantId = SnowflakeField(read_only=True)
    supplier = serializers.CharField(read_only=True)
    locationId = SnowflakeField(read_only=True)
    currency = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=PurchaseOrder.Status.choices, read_only=True)
    lines = PurchaseOrderLineSerializer(many=True, read_only=True)
    orderedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    receivedAt = serializers.DateTimeField(read_only=True, allow_null=True)
    createdBy = SnowflakeField(read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)


class PurchaseOrderLineInputSerializer(BaseSerializer):
    inventoryItemId = SnowflakeField(source="item_id")
    quantity = QuantityField()
    unitCostAmount = AmountField()


class PurchaseOrderCreateSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.purchase_order_create."""

    merchantId = SnowflakeField()
    supplier = _text()
    currency = StrictCharField(max_length=3, validators=[RegexValidator(r"^[A-Z]{3}$", "An ISO 4217 code in capitals, such as EUR.")])
    locationId = SnowflakeField(required=False)
    lines = PurchaseOrderLineInputSerializer(many=True, allow_empty=False, max_length=MAX_LINES)


class ReceiptLineSerializer(BaseSerializer):
    inventoryItemId = SnowflakeField(source="item_id")
    quantity = QuantityField()


class ReceiveSerializer(BaseSerializer):
    """Validates to the keyword arguments of services.purchase_order_receive."""

    receiptId = _token(help_text="The caller's key: a receipt id applies once.")
    lines = ReceiptLineSerializer(many=True, allow_empty=False, max_length=MAX_LINES)
    allowOverReceipt = serializers.BooleanField(required=False)


# --- payment.success (docs/events.md) -------------------------------------------------------------
# Event values are read with DRF's plain serializers on purpose: producers add members over time,
# and a consumer ignores what it does not know (the strict kernel bases refuse unknown members).


class _PaidLine(serializers.Serializer):
    lineId = _token(source="line_id")
    variantId = SnowflakeField(source="variant_id")
    quantity = QuantityField()
    locationId = SnowflakeField(source="location_id", required=False)


class _PaidOrder(serializers.Serializer):
    merchantId = SnowflakeField(source="merchant_id")
    lines = _PaidLine(many=True, required=False, default=list)  # a payment opened without lines deducts nothing


class _PaidTransaction(serializers.Serializer):
    sourceId = _token(source="source_id")


class PaymentSuccessSerializer(serializers.Serializer):
    """Validates a payment.success value to the keyword arguments of services.stock_deduct_order."""

    transaction = _PaidTransaction()
    order = _PaidOrder()

    def validate(self, attrs):
        order = attrs["order"]
        ids = [line["line_id"] for line in order["lines"]]
        if len(set(ids)) != len(ids):
            raise serializers.ValidationError({"order": "Each lineId may appear once."})
        return {"order_id": attrs["transaction"]["source_id"], "merchant_id": order["merchant_id"], "lines": order["lines"]}


# The plain-Python reading of a well-formed payment.success value: in a batch of 500 orders DRF's
# field tree cost more than the deduction itself (docs/performance.md, inventory). It accepts only
# values the serializer accepts unchanged (no whitespace to trim, ids as ASCII digits or integers)
# and returns what the serializer would; anything else (None) goes to PaymentSuccessSerializer,
# which decides and names what is wrong. tests/inventory/test_payment_success.py holds them equal.
_TOKEN = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def _snowflake(data) -> int | None:
    if type(data) is str and data.isascii() and data.isdigit():
        data = int(data)
    elif type(data) is not int:
        return None
    return data if 0 < data < 2**63 else None


def _paid_line(line) -> dict | None:
    if type(line) is not dict:
        return None
    line_id, variant_id, quantity = line.get("lineId"), _snowflake(line.get("variantId")), line.get("quantity")
    if type(line_id) is not str or not _TOKEN.fullmatch(line_id) or variant_id is None:
        return None
    if type(quantity) is not int or not 1 <= quantity <= MAX_QUANTITY:
        return None
    paid = {"line_id": line_id, "variant_id": variant_id, "quantity": quantity}
    if "locationId" in line:
        if (location_id := _snowflake(line["locationId"])) is None:
            return None
        paid["location_id"] = location_id
    return paid


def paid_orders(values: list) -> list[dict] | None:
    """PaymentSuccessSerializer(data=values, many=True).validated_data when every value is plainly
    well formed, else None."""
    orders = []
    for value in values:
        transaction, order = (value.get("transaction"), value.get("order")) if type(value) is dict else (None, None)
        if type(transaction) is not dict or type(order) is not dict or type(order.get("lines", [])) is not list:
            return None
        order_id, merchant_id = transaction.get("sourceId"), _snowflake(order.get("merchantId"))
        lines = [_paid_line(line) for line in order.get("lines", [])]
        if type(order_id) is not str or not _TOKEN.fullmatch(order_id) or merchant_id is None or None in lines:
            return None
        if len({line["line_id"] for line in lines}) != len(lines):
            return None
        orders.append({"order_id": order_id, "merchant_id": merchant_id, "lines": lines})
    return orders


# --- payment.refunded (docs/events.md) ------------------------------------------------------------


class _StrictBooleanField(serializers.BooleanField):
    """A JSON boolean, nothing else (DRF would take "yes", 1 or "true")."""

    default_error_messages = {"invalid": "Give true or false (a JSON boolean)."}

    def to_internal_value(self, data):
        if type(data) is not bool:
            self.fail("invalid")
        return data


class _RefundLine(serializers.Serializer):
    lineId = _token(source="line_id")
    variantId = SnowflakeField(source="variant_id")
    quantity = QuantityField()
    restock = _StrictBooleanField()
    locationId = SnowflakeField(source="location_id", required=False, allow_null=True)


class _Refund(serializers.Serializer):
    id = SnowflakeField()
    merchantId = SnowflakeField(source="merchant_id")
    sourceId = _token(source="source_id")
    status = serializers.ChoiceField(choices=["SUCCEEDED"])
    lines = _RefundLine(many=True, required=False, default=list, max_length=MAX_LINES)  # a refund without lines restocks nothing


class _RefundedTransaction(serializers.Serializer):
    merchantId = SnowflakeField(source="merchant_id")
    sourceId = _token(source="source_id")


class PaymentRefundedSerializer(serializers.Serializer):
    """Validates a payment.refunded value to one refund of services.stock_return_refunds: the
    refund's id, merchant, sale order (`refund.sourceId`, the deduction's orderId) and lines. The
    refund must be the transaction's: same merchant, same sale."""

    event = serializers.ChoiceField(choices=["refund.succeeded"])
    transaction = _RefundedTransaction()
    refund = _Refund()

    def validate(self, attrs):
        refund, sale = attrs["refund"], attrs["transaction"]
        if (refund["merchant_id"], refund["source_id"]) != (sale["merchant_id"], sale["source_id"]):
            raise serializers.ValidationError({"refund": "merchantId and sourceId must be the transaction's."})
        ids = [line["line_id"] for line in refund["lines"]]
        if len(set(ids)) != len(ids):
            raise serializers.ValidationError({"refund": {"lines": "Each lineId may appear once."}})
        return {"refund_id": refund["id"], "merchant_id": refund["merchant_id"], "order_id": refund["source_id"], "lines": refund["lines"]}
