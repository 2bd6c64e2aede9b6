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

from apps.commerce.sales.models import (  # noqa: F401  (imported here so Django registers them with commerce)
    PaymentSubscription,
    PaymentWebhookReceipt,
    SaleOrder,
    SaleOrderLine,
    SaleReturn,
    SaleReturnLine,
    UnmatchedRefund,
    UnmatchedSettlement,
)
from merchant_platform.idempotency import IdempotencyKeyBase
from merchant_platform.messaging.models import ProcessedMessageBase
from merchant_platform.models import OwnedModel
from merchant_platform.money import MAX_AMOUNT

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


class IdempotencyKey(IdempotencyKeyBase):
    """A REST `Idempotency-Key` of creating or placing a sale order (merchant_platform/idempotency.py)."""

    class Meta(IdempotencyKeyBase.Meta):
        db_table = "commerce_idempotency_key"
