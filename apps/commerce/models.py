"""Commerce records: merchants (the root of the tenant tree), the catalog (products and their
variants) and product media. Provider integrations live in the shared `public` Configuration table
(merchant_platform.models.Configuration, spec 2.1) so payment can read them without importing commerce.

The tables `merchant`, `product` and `product_variant` are captured by the CDC relay (apps/commerce/cdc.py):
their columns are the change streams' contract (docs/events.md, "Commerce change streams"). Rename or
retype a column only with the consumers (inventory, finance, taxation) in mind.
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q

from merchant_platform.idempotency import IdempotencyKeyBase
from merchant_platform.messaging.models import ProcessedMessageBase
from merchant_platform.models import OwnedModel, SnowflakeIdField
from merchant_platform.money import MAX_AMOUNT, MAX_QUANTITY

ATTRIBUTES_MAX_BYTES = 4096  # a variant's attributes, as compact JSON


class Merchant(OwnedModel):
    """A seller: the tenant every other service's records hang from (their `merchant_id`)."""

    class Status(models.TextChoices):
        ACTIVE = "ACTIVE"
        SUSPENDED = "SUSPENDED"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64)
    legal_name = models.CharField(max_length=200, blank=True)
    default_currency = models.CharField(max_length=3)  # ISO 4217
    country = models.CharField(max_length=2)  # ISO 3166-1 alpha-2
    timezone = models.CharField(max_length=64, default="UTC")  # an IANA zone name
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)

    class Meta(OwnedModel.Meta):
        db_table = "merchant"
        ordering = ("-created_at", "-id")
        constraints = [models.UniqueConstraint(fields=["slug"], condition=Q(deleted_at__isnull=True), name="merchant_slug_alive_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"


class Product(OwnedModel):
    """A catalog product of one merchant (spec 2.1 productId). What is sold is one of its variants."""

    class Status(models.TextChoices):
        DRAFT = "DRAFT"  # not published: out of the search index
        PUBLISHED = "PUBLISHED"
        ARCHIVED = "ARCHIVED"  # no longer sold: out of the search index

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="products")
    name = models.CharField(max_length=200)
    description = models.TextField(max_length=10000, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    # Taxation's TaxGroup (a plain id: no foreign key crosses services). Taxation provisions tax to
    # the product while it is set and deprovisions when it is cleared or the product is deleted.
    tax_group_id = models.BigIntegerField(null=True, blank=True)

    class Meta(OwnedModel.Meta):
        db_table = "product"
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["merchant", "status"], name="product_merchant_status")]

    def __str__(self) -> str:
        return self.name


class ProductVariant(OwnedModel):
    """A sellable form of a product (size, colour...): its SKU, price and unit cost. `primary_product`
    is spec 2.1's primaryProductId; `merchant` repeats the product's merchant so the SKU is unique
    per merchant among live rows and inventory reads the tenant from the change stream directly."""

    class Status(models.TextChoices):
        ACTIVE = "ACTIVE"
        INACTIVE = "INACTIVE"

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="variants")
    primary_product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="variants")
    sku = models.CharField(max_length=64)
    name = models.CharField(max_length=200, blank=True)
    price_amount = models.BigIntegerField()  # minor units of `currency`
    currency = models.CharField(max_length=3)  # ISO 4217
    unit_cost_amount = models.BigIntegerField(null=True, blank=True)  # minor units of `currency`
    attributes = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)

    class Meta(OwnedModel.Meta):
        db_table = "product_variant"
        ordering = ("-created_at", "-id")
        constraints = [
            models.UniqueConstraint(fields=["merchant", "sku"], condition=Q(deleted_at__isnull=True), name="variant_sku_alive_unique"),
            models.CheckConstraint(condition=Q(price_amount__gte=0), name="variant_price_not_negative"),
            models.CheckConstraint(
                condition=Q(unit_cost_amount__isnull=True) | Q(unit_cost_amount__gte=0), name="variant_unit_cost_not_negative"
            ),
            models.CheckConstraint(condition=Q(price_amount__lte=MAX_AMOUNT), name="variant_price_within_max"),
            models.CheckConstraint(
                condition=Q(unit_cost_amount__isnull=True) | Q(unit_cost_amount__lte=MAX_AMOUNT), name="variant_unit_cost_within_max"
            ),
        ]

    def __str__(self) -> str:
        return self.sku


class ProductMedia(OwnedModel):
    """An image of a product, stored in object storage under `object_key` (never a public bucket)."""

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="media")
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="media")
    object_key = models.CharField(max_length=255, unique=True)
    content_type = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    filename = models.CharField(max_length=255, blank=True)
    # Set once the object was removed from storage (the orphan sweep); the row stays as history.
    object_removed_at = models.DateTimeField(null=True, blank=True)

    class Meta(OwnedModel.Meta):
        db_table = "product_media"
        ordering = ("created_at", "id")

    def __str__(self) -> str:
        return self.object_key


class ProductSearchDocument(models.Model):
    """The search index of one product (spec 1.3's search engine, as PostgreSQL full-text search):
    written only by the sync worker (services.search_sync_products), from the product's current
    rows, so a replayed or reordered sync converges. Holds live PUBLISHED and ARCHIVED products; a
    DRAFT (unpublished) or deleted product has no document. An index row, not a business record:
    no snowflake id, no soft delete."""

    product_id = models.BigIntegerField(primary_key=True)
    merchant_id = models.BigIntegerField(db_index=True)
    created_by = models.BigIntegerField(null=True, blank=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    skus = models.TextField(blank=True)  # the live variants' SKUs, space-separated
    status = models.CharField(max_length=16)
    min_price_amount = models.BigIntegerField(null=True, blank=True)  # over the live ACTIVE variants
    max_price_amount = models.BigIntegerField(null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    search_vector = SearchVectorField(null=True)
    source_updated_at = models.DateTimeField()  # the product's updated_at when indexed
    indexed_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "product_search_document"
        # fastupdate off: every sync rewrites a document, and a GIN pending list (up to
        # gin_pending_list_limit, 4 MB) is read in full by every search until it is merged, and
        # merged by whichever write fills it (docs/performance.md, commerce).
        indexes = [
            GinIndex(fields=["search_vector"], name="product_search_vector", fastupdate=False),
            GinIndex(
                fields=["name"], opclasses=["gin_trgm_ops"], name="product_search_name_trgm", fastupdate=False
            ),  # pg_trgm ignores case
        ]

    def __str__(self) -> str:
        return self.name


class ProcessedMessage(ProcessedMessageBase):
    """Change events the search consumer handled (the kernel's idempotency store)."""


class SaleOrder(OwnedModel):
    """A sale (issue 20): lines priced from the catalog when ordered, taxed by taxation's quote when
    placed, paid through one payment transaction whose `sourceId` is this order's id. The state
    machine is in docs/services/commerce.md ("Sale orders"); services.sales holds every move."""

    class Status(models.TextChoices):
        DRAFT = "DRAFT"  # editable, nothing held anywhere
        PLACED = "PLACED"  # stock reserved, tax quoted, payment transaction open
        PAID = "PAID"  # the payment transaction settled
        FULFILLED = "FULFILLED"  # handed over (final)
        CANCELLED = "CANCELLED"  # final; its reservation released, its payment cancelled
        EXPIRED = "EXPIRED"  # unpaid in time (final); its reservation released

    merchant = models.ForeignKey(Merchant, on_delete=models.PROTECT, related_name="sale_orders")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
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
    signing secret payment gave when it was made, sealed (AES-256-GCM, bound to the merchant)."""

    merchant = models.OneToOneField(Merchant, on_delete=models.PROTECT, primary_key=True, related_name="payment_subscription")
    webhook_id = models.BigIntegerField()
    sealed_secret = models.TextField()
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


class IdempotencyKey(IdempotencyKeyBase):
    """A REST `Idempotency-Key` of creating or placing a sale order (merchant_platform/idempotency.py)."""

    class Meta(IdempotencyKeyBase.Meta):
        db_table = "commerce_idempotency_key"
