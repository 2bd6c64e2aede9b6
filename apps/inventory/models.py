"""Inventory records (spec 2.1): locations, items (one per commerce product variant), stock per item
and location, the append-only tracking of every stock change, reservations of sale-order lines,
cycle-count tickets and purchase orders with their receipts.

Quantities are whole units (bigint). Money is integer minor units beside its currency
(docs/architecture.md section 10). Other services' records (merchants, variants, sale orders) are plain
ids: no foreign key leaves the `inventory` schema.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from merchant_platform.idempotency import IdempotencyKeyBase
from merchant_platform.messaging.models import OutboxMessageBase, ProcessedMessageBase
from merchant_platform.models import BaseModel, OwnedModel
from merchant_platform.money import MAX_AMOUNT, MAX_QUANTITY

# CHECK constraints hold the money path's limits (merchant_platform/money.py) in the tables too.
COST_WITHIN_LIMIT = Q(unit_cost_amount__isnull=True) | Q(unit_cost_amount__gte=0, unit_cost_amount__lte=MAX_AMOUNT)


class Location(OwnedModel):
    """A place that holds stock. Each live merchant has exactly one default location, created and
    kept by the MERCHANT change stream (services.location_ensure_default, spec 6.2)."""

    merchant_id = models.BigIntegerField()
    name = models.CharField(max_length=200)
    code = models.CharField(max_length=64, blank=True)
    is_default = models.BooleanField(default=False)

    class Meta(OwnedModel.Meta):
        db_table = "location"
        ordering = ("-is_default", "name", "id")
        constraints = [
            # Never two default locations for one merchant, whatever replays race (any row, live or
            # not: a soft-deleted default is restored, never duplicated).
            models.UniqueConstraint(fields=["merchant_id"], condition=Q(is_default=True), name="location_one_default"),
        ]
        indexes = [models.Index(fields=["merchant_id"], name="location_merchant")]

    def __str__(self) -> str:
        return self.name


class Item(BaseModel):
    """The inventory side of one commerce product variant (PRODUCT_VARIANT stream, upserted by
    `variant_id`). `currency` is the variant's sale currency. `unit_cost_amount` is the moving-average
    unit cost in minor units of `cost_currency`, its own currency (what the stock was bought in),
    updated by purchase-order receipts (rounded half-up to the minor unit at each receipt). The cost
    currency holds while any unit is on hand; a receipt after the stock is gone starts the cost
    afresh in the receipt's currency."""

    class Status(models.TextChoices):
        ACTIVE = "ACTIVE"
        INACTIVE = "INACTIVE"  # the variant is inactive or deleted in commerce

    merchant_id = models.BigIntegerField()
    variant_id = models.BigIntegerField(unique=True)
    product_id = models.BigIntegerField(null=True, blank=True)
    sku = models.CharField(max_length=64)
    name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    allow_oversell = models.BooleanField(default=False)
    currency = models.CharField(max_length=3, blank=True)
    unit_cost_amount = models.BigIntegerField(null=True, blank=True)
    cost_currency = models.CharField(max_length=3, blank=True)

    class Meta(BaseModel.Meta):
        db_table = "item"
        ordering = ("sku", "id")
        indexes = [models.Index(fields=["merchant_id", "sku"], name="item_merchant_sku")]
        constraints = [models.CheckConstraint(condition=COST_WITHIN_LIMIT, name="item_cost_within_limit")]

    def __str__(self) -> str:
        return self.sku


class Stock(BaseModel):
    """Quantity of one item at one location (spec 2.1 InventoryStock). available = on hand - reserved.
    Every change goes through services' stock-change core, which locks rows in primary-key order
    and writes one Tracking row per change."""

    merchant_id = models.BigIntegerField()
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="stocks")
    location = models.ForeignKey(Location, on_delete=models.PROTECT, related_name="stocks")
    quantity_on_hand = models.BigIntegerField(default=0)
    reserved = models.BigIntegerField(default=0)

    class Meta(BaseModel.Meta):
        db_table = "stock"
        ordering = ("id",)
        constraints = [
            models.UniqueConstraint(fields=["item", "location"], condition=Q(deleted_at__isnull=True), name="stock_item_location_alive"),
            models.CheckConstraint(condition=Q(reserved__gte=0), name="stock_reserved_not_negative"),
            models.CheckConstraint(condition=Q(reserved__lte=MAX_QUANTITY), name="stock_reserved_within_limit"),
            models.CheckConstraint(
                condition=Q(quantity_on_hand__gte=-MAX_QUANTITY, quantity_on_hand__lte=MAX_QUANTITY), name="stock_on_hand_within_limit"
            ),
        ]
        indexes = [models.Index(fields=["merchant_id"], name="stock_merchant")]

    def __str__(self) -> str:
        return f"{self.item_id}@{self.location_id}"


class ReferenceType(models.TextChoices):
    SALE_ORDER = "SALE_ORDER"
    PURCHASE_ORDER = "PURCHASE_ORDER"
    ADJUSTMENT = "ADJUSTMENT"
    CYCLE_COUNT = "CYCLE_COUNT"
    RESERVATION = "RESERVATION"
    REFUND = "REFUND"  # payment.refunded: reference id the refund, line the sale line's lineId


class Operation(models.TextChoices):
    ADJUST = "ADJUST"
    DEDUCT = "DEDUCT"
    RESERVE = "RESERVE"
    RELEASE = "RELEASE"
    RECEIVE = "RECEIVE"
    COUNT = "COUNT"
    RETURN = "RETURN"  # a refunded sale line's goods back on hand


class Note(models.TextChoices):
    NONE = ""
    OVERSELL_BLOCKED = "OVERSELL_BLOCKED"
    OVERSOLD = "OVERSOLD"  # allowed by allowOversell: on hand went below zero
    ADJUSTMENT_NEUTRAL = "ADJUSTMENT_NEUTRAL"
    RESERVATION_EXPIRED = "RESERVATION_EXPIRED"
    RESERVATION_CONVERTED = "RESERVATION_CONVERTED"
    # a return asked for more than its sale line's deduction has left to return: delta is what was
    # left (0 when nothing), `requested` what was asked
    RETURN_EXCEEDS_DEDUCTED = "RETURN_EXCEEDS_DEDUCTED"


class Tracking(BaseModel):
    """One stock change (spec 2.1 InventoryTracking): immutable. A database trigger (migration 0002)
    refuses every UPDATE and DELETE of this table, so neither the ORM, raw SQL nor a soft delete can
    change history; corrections are new rows.

    `delta` is the change of on hand, `reserved_delta` of reserved; `quantity_after` and
    `reserved_after` the stock's values after it. `requested` is what was asked (a blocked deduction
    has delta 0 and requested > 0). (`merchant_id`, `operation`, `reference_type`, `reference_id`,
    `reference_line`) is unique: the idempotency of deductions, reservations and receipts, per
    merchant (another merchant's record with the same reference never stands in for this one's).
    A RETURN row names the DEDUCT row whose goods it brings back (`returned_from`): what a sale
    line has left to return is that row's deduction minus its RETURN rows' deltas."""

    merchant_id = models.BigIntegerField()
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="+")
    location = models.ForeignKey(Location, on_delete=models.PROTECT, related_name="+")
    stock = models.ForeignKey(Stock, on_delete=models.PROTECT, related_name="tracking")
    operation = models.CharField(max_length=16, choices=Operation.choices)
    delta = models.BigIntegerField()
    reserved_delta = models.BigIntegerField(default=0)
    requested = models.BigIntegerField(default=0)
    quantity_after = models.BigIntegerField()
    reserved_after = models.BigIntegerField()
    reference_type = models.CharField(max_length=32, choices=ReferenceType.choices)
    reference_id = models.CharField(max_length=64)
    reference_line = models.CharField(max_length=128, blank=True)
    note = models.CharField(max_length=32, choices=Note.choices, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    unit_cost_amount = models.BigIntegerField(null=True, blank=True)
    cost_currency = models.CharField(max_length=3, blank=True)  # the currency of unit_cost_amount
    created_by = models.BigIntegerField(null=True, blank=True)
    returned_from = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    class Meta(BaseModel.Meta):
        db_table = "tracking"
        ordering = ("-id",)
        constraints = [
            models.UniqueConstraint(
                fields=["merchant_id", "operation", "reference_type", "reference_id", "reference_line"], name="tracking_once_per_merchant"
            ),
            models.CheckConstraint(condition=COST_WITHIN_LIMIT, name="tracking_cost_within_limit"),
            # Only a RETURN brings back a deduction, and it always names the one it brings back.
            models.CheckConstraint(
                condition=Q(operation="RETURN", returned_from__isnull=False) | (~Q(operation="RETURN") & Q(returned_from__isnull=True)),
                name="tracking_return_names_its_deduction",
            ),
        ]
        indexes = [
            models.Index(fields=["stock", "id"], name="tracking_stock"),
            models.Index(fields=["merchant_id", "created_at"], name="tracking_merchant"),
            models.Index(fields=["merchant_id", "reference_type", "reference_id"], name="tracking_merchant_reference"),
        ]


class Reservation(BaseModel):
    """Units of one sale-order line held for it (commerce's internal API, HTTP Basic). ACTIVE until
    released, committed (deducted on payment) or expired (`expires_at`, the beat task). Unique per
    merchant, order and line: an order reference is the merchant's, not global."""

    class Status(models.TextChoices):
        ACTIVE = "ACTIVE"
        RELEASED = "RELEASED"
        COMMITTED = "COMMITTED"
        EXPIRED = "EXPIRED"

    merchant_id = models.BigIntegerField()
    order_id = models.CharField(max_length=64)
    line_id = models.CharField(max_length=64)
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="+")
    location = models.ForeignKey(Location, on_delete=models.PROTECT, related_name="+")
    stock = models.ForeignKey(Stock, on_delete=models.PROTECT, related_name="reservations")
    quantity = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    expires_at = models.DateTimeField()

    class Meta(BaseModel.Meta):
        db_table = "reservation"
        ordering = ("order_id", "line_id")
        constraints = [
            models.UniqueConstraint(fields=["merchant_id", "order_id", "line_id"], name="reservation_merchant_order_line"),
            models.CheckConstraint(condition=Q(quantity__gt=0), name="reservation_quantity_positive"),
            models.CheckConstraint(condition=Q(quantity__lte=MAX_QUANTITY), name="reservation_quantity_within_limit"),
        ]
        indexes = [models.Index(fields=["expires_at"], condition=Q(status="ACTIVE"), name="reservation_active_expiry")]


class Ticket(OwnedModel):
    """A cycle count of one item at one location (spec 2.1 InventoryTicket, type CYCLE_COUNT):
    OPEN -> COUNTED -> APPLIED, or CANCELLED from OPEN or COUNTED."""

    class Type(models.TextChoices):
        CYCLE_COUNT = "CYCLE_COUNT"

    class Status(models.TextChoices):
        OPEN = "OPEN"
        COUNTED = "COUNTED"
        APPLIED = "APPLIED"
        CANCELLED = "CANCELLED"

    merchant_id = models.BigIntegerField()
    type = models.CharField(max_length=16, choices=Type.choices, default=Type.CYCLE_COUNT)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="+")
    location = models.ForeignKey(Location, on_delete=models.PROTECT, related_name="+")
    counted_quantity = models.BigIntegerField(null=True, blank=True)
    expected_quantity = models.BigIntegerField(null=True, blank=True)  # on hand when applied
    difference = models.BigIntegerField(null=True, blank=True)
    note = models.CharField(max_length=500, blank=True)

    class Meta(OwnedModel.Meta):
        db_table = "ticket"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["merchant_id", "status"], name="ticket_merchant_status")]


class PurchaseOrder(OwnedModel):
    """Stock ordered from a supplier: DRAFT -> ORDERED -> PARTIALLY_RECEIVED -> RECEIVED, or
    CANCELLED from DRAFT or ORDERED. Receipts add stock at `location`."""

    class Status(models.TextChoices):
        DRAFT = "DRAFT"
        ORDERED = "ORDERED"
        PARTIALLY_RECEIVED = "PARTIALLY_RECEIVED"
        RECEIVED = "RECEIVED"
        CANCELLED = "CANCELLED"

    merchant_id = models.BigIntegerField()
    supplier = models.CharField(max_length=200)
    location = models.ForeignKey(Location, on_delete=models.PROTECT, related_name="+")
    currency = models.CharField(max_length=3)
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.DRAFT)
    ordered_at = models.DateTimeField(null=True, blank=True)
    received_at = models.DateTimeField(null=True, blank=True)

    class Meta(OwnedModel.Meta):
        db_table = "purchase_order"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["merchant_id", "status"], name="po_merchant_status")]


class PurchaseOrderLine(BaseModel):
    purchase_order = models.ForeignKey(PurchaseOrder, on_delete=models.PROTECT, related_name="lines")
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="+")
    quantity_ordered = models.BigIntegerField()
    quantity_received = models.BigIntegerField(default=0)
    unit_cost_amount = models.BigIntegerField()

    class Meta(BaseModel.Meta):
        db_table = "purchase_order_line"
        ordering = ("id",)
        constraints = [
            models.CheckConstraint(condition=Q(quantity_ordered__gt=0), name="po_line_quantity_positive"),
            models.CheckConstraint(condition=Q(unit_cost_amount__gte=0), name="po_line_cost_not_negative"),
            models.CheckConstraint(condition=Q(quantity_received__gte=0), name="po_line_received_not_negative"),
            models.CheckConstraint(
                condition=Q(quantity_ordered__lte=MAX_QUANTITY, quantity_received__lte=MAX_QUANTITY), name="po_line_quantity_within_limit"
            ),
            models.CheckConstraint(condition=Q(unit_cost_amount__lte=MAX_AMOUNT), name="po_line_cost_within_limit"),
            models.UniqueConstraint(fields=["purchase_order", "item"], name="po_line_item_once"),
        ]

    @property
    def quantity_open(self) -> int:
        return self.quantity_ordered - self.quantity_received


class PurchaseOrderReceipt(BaseModel):
    """One receipt of goods (idempotent per `receipt_id`, the caller's key): `lines` is the received
    snapshot published on purchase-order.received."""

    purchase_order = models.ForeignKey(PurchaseOrder, on_delete=models.PROTECT, related_name="receipts")
    receipt_id = models.CharField(max_length=64)
    lines = models.JSONField(default=list)
    created_by = models.BigIntegerField(null=True, blank=True)

    class Meta(BaseModel.Meta):
        db_table = "purchase_order_receipt"
        ordering = ("id",)
        constraints = [models.UniqueConstraint(fields=["purchase_order", "receipt_id"], name="po_receipt_once")]


class IdempotencyKey(IdempotencyKeyBase):
    """A REST `Idempotency-Key` of a POST that creates stock records (merchant_platform/idempotency.py)."""

    class Meta(IdempotencyKeyBase.Meta):
        db_table = "inventory_idempotency_key"


class OutboxMessage(OutboxMessageBase):
    """Events inventory publishes (docs/events.md): sent once their change commits."""


class ProcessedMessage(ProcessedMessageBase):
    """Broker messages inventory's consumers handled (docs/events.md, idempotency)."""
