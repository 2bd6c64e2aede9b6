"""Writes of products, and the check of the tax group a product names."""

from __future__ import annotations

from django.conf import settings as django_settings
from django.db import transaction

from apps.commerce.models import Merchant, Product, ProductVariant
from apps.commerce.services.records import DB, apply_changes, catalog_changed, locked
from merchant_platform import references
from merchant_platform.errors import InvalidInput, NotFound

# --- Products -------------------------------------------------------------------------------------


def tax_group_check(merchant_id: int, tax_group_id: int | None) -> None:
    """A tax group a user names on a product (create or update) is the merchant's own: taxation,
    which owns it, answers (400 naming `taxGroupId` otherwise, 503 when it cannot answer). Called
    by the views before the write; internal callers (consumers, seeds) pass ids they already hold."""
    if tax_group_id is not None:
        references.check_owned(
            field="taxGroupId",
            url=f"{django_settings.COMMERCE_TAXATION_URL}/tax-groups/{tax_group_id}",
            merchant_id=merchant_id,
            what="tax group",
        )


def product_create(
    *,
    merchant_id: int,
    name: str,
    description: str = "",
    status: str = Product.Status.DRAFT,
    tax_group_id: int | None = None,
    created_by: int | None = None,
) -> Product:
    with transaction.atomic(using=DB):
        if not Merchant.objects.filter(pk=merchant_id).exists():
            raise NotFound("No merchant has this id.")
        product = Product(
            merchant_id=merchant_id, name=name, description=description, status=status, tax_group_id=tax_group_id, created_by=created_by
        )
        product.save(using=DB, force_insert=True)
        catalog_changed(merchant_id)
    return product


def product_update(*, product_id: int, **changes) -> Product:
    """Change a product's name, description, status or tax group (never its merchant)."""
    allowed = {"name", "description", "status", "tax_group_id"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    with transaction.atomic(using=DB):
        product = locked(Product, product_id)
        fields = apply_changes(product, changes)
        if fields:
            product.save(using=DB, update_fields=[*fields, "updated_at"])
            catalog_changed(product.merchant_id)
    return product


def product_delete(*, product_id: int) -> None:
    """Soft-delete a product with its variants and media rows, in one transaction (the media
    objects themselves are removed later by the orphan sweep)."""
    with transaction.atomic(using=DB):
        product = locked(Product, product_id)
        # Row by row, so each variant's delete reaches the PRODUCT_VARIANT stream as its own change.
        for variant in ProductVariant.objects.select_for_update().filter(primary_product_id=product.id).order_by("pk"):
            variant.delete(using=DB)
        product.media.all().delete()
        product.delete(using=DB)
        catalog_changed(product.merchant_id)


def product_restore(*, product_id: int) -> Product:
    """Bring a soft-deleted product back (an operator action; its variants stay deleted)."""
    with transaction.atomic(using=DB):
        product = Product.all_objects.select_for_update().filter(pk=product_id).first()
        if product is None or not Merchant.objects.filter(pk=product.merchant_id).exists():
            raise NotFound("No product has this id.")
        if product.deleted_at is not None:
            product.deleted_at = None
            product.save(using=DB, update_fields=["deleted_at", "updated_at"])
            catalog_changed(product.merchant_id)
    return product
