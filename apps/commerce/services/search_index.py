"""Writes of the search index (ProductSearchDocument)."""

from __future__ import annotations

from django.contrib.postgres.search import SearchVector
from django.db import transaction
from django.db.models import Value

from apps.commerce import selectors
from apps.commerce.models import Merchant, Product, ProductSearchDocument, ProductVariant
from apps.commerce.services import caches
from apps.commerce.services.records import DB

# --- Search index ---------------------------------------------------------------------------------
# Written only by the sync worker (tasks.sync_products, fed by the product change stream) and by
# `manage.py reindex_products`, a batch of products at a time. A sync locks its products (in id
# order, so two batches never deadlock) and reads their rows only then: a later sync of a product
# waits for the earlier one and reads everything committed before it, so the latest version is
# written last, a replay changes nothing and any order converges.

INDEXED_STATUSES = (Product.Status.PUBLISHED, Product.Status.ARCHIVED)
REINDEX_BATCH = 1000
_DOCUMENT_FIELDS = (
    "merchant_id",
    "created_by",
    "name",
    "description",
    "skus",
    "status",
    "min_price_amount",
    "max_price_amount",
    "currency",
    "source_updated_at",
    "search_vector",
    "indexed_at",
)


def _indexed_products():
    """The products that belong in the index: live, PUBLISHED or ARCHIVED, of a live merchant."""
    return Product.objects.filter(status__in=INDEXED_STATUSES, merchant__deleted_at__isnull=True)


def _search_document(product: dict, variants: list[tuple]) -> ProductSearchDocument:
    active = [v for v in variants if v[3] == ProductVariant.Status.ACTIVE]
    skus = " ".join(v[0] for v in variants)
    # Computed by PostgreSQL in the INSERT, from the values written. SKUs are indexed as their words
    # (selectors.search_words), as queries are split.
    vector = (
        SearchVector(Value(product["name"]), weight="A", config="simple")
        + SearchVector(Value(" ".join(selectors.search_words(skus))), weight="A", config="simple")
        + SearchVector(Value(product["description"]), weight="B", config="simple")
    )
    return ProductSearchDocument(
        product_id=product["id"],
        merchant_id=product["merchant_id"],
        created_by=product["created_by"],
        name=product["name"],
        description=product["description"],
        skus=skus,
        status=product["status"],
        min_price_amount=active[0][1] if active else None,
        max_price_amount=active[-1][1] if active else None,
        currency=active[0][2] if active else "",
        source_updated_at=product["updated_at"],
        search_vector=vector,
    )


def search_sync_products(*, product_ids) -> int:
    """Make the search documents of `product_ids` match their rows, in one transaction: the indexed
    ones written with one INSERT ... ON CONFLICT, the others (deleted, unpublished, gone) removed.
    Returns how many of them are in the index afterwards."""
    ids = sorted({int(product_id) for product_id in product_ids})
    if not ids:
        return 0
    with transaction.atomic(using=DB):
        # FOR UPDATE returns each product's latest committed row once its lock is granted; the
        # merchants and variants are read by later statements, which see what committed before them
        # (READ COMMITTED), so after the locks.
        rows = (
            Product.all_objects.select_for_update()
            .filter(pk__in=ids)
            .order_by("pk")
            .values("id", "merchant_id", "created_by", "name", "description", "status", "updated_at", "deleted_at")
        )
        products = [row for row in rows if row["deleted_at"] is None and row["status"] in INDEXED_STATUSES]
        live_merchants = set(Merchant.objects.filter(pk__in={row["merchant_id"] for row in products}).values_list("pk", flat=True))
        products = [row for row in products if row["merchant_id"] in live_merchants]
        variants: dict[int, list[tuple]] = {product["id"]: [] for product in products}
        variant_rows = (
            ProductVariant.objects.filter(primary_product_id__in=list(variants))
            .order_by("primary_product_id", "price_amount", "pk")
            .values_list("primary_product_id", "sku", "price_amount", "currency", "status")
        )
        for product_id, *variant in variant_rows:
            variants[product_id].append(tuple(variant))
        if products:
            ProductSearchDocument.objects.bulk_create(
                [_search_document(product, variants[product["id"]]) for product in products],
                update_conflicts=True,
                unique_fields=["product_id"],
                update_fields=_DOCUMENT_FIELDS,
            )
        ProductSearchDocument.objects.filter(pk__in=set(ids) - set(variants)).delete()
    return len(products)


def search_reindex(*, batch_size: int = REINDEX_BATCH) -> int:
    """Rebuild every document (`manage.py reindex_products`), batch by batch while searches keep
    answering, then remove the documents of products that are no longer indexed; returns the
    documents written."""
    indexed, last = 0, 0
    ids = Product.objects.filter(status__in=INDEXED_STATUSES).order_by("pk").values_list("pk", flat=True)
    while batch := list(ids.filter(pk__gt=last)[:batch_size]):
        indexed += search_sync_products(product_ids=batch)
        last = batch[-1]
    ProductSearchDocument.objects.exclude(product_id__in=_indexed_products().values("pk")).delete()
    caches.search_indexed()
    return indexed
