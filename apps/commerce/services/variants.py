"""Writes of product variants (SKUs unique per merchant among live variants)."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from apps.commerce.models import Product, ProductVariant
from apps.commerce.services.records import (
    DB,
    apply_changes,
    catalog_changed,
    check_amount,
    check_attributes,
    check_currency,
    locked,
    save_fields,
)
from merchant_platform.errors import Conflict, InvalidInput, NotFound

# --- Variants -------------------------------------------------------------------------------------


def _sku_taken() -> Conflict:
    return Conflict("Another live variant of this merchant has this SKU.", code="SKU_TAKEN")


def _check_variant(changes: dict) -> None:
    if "currency" in changes:
        check_currency("currency", changes["currency"])
    if "price_amount" in changes:
        if changes["price_amount"] is None:
            raise InvalidInput({"priceAmount": "A variant has a price."})
        check_amount("priceAmount", changes["price_amount"])
    if "unit_cost_amount" in changes:
        check_amount("unitCostAmount", changes["unit_cost_amount"])
    if "attributes" in changes:
        check_attributes(changes["attributes"])


def variant_create(
    *,
    product_id: int,
    sku: str,
    price_amount: int,
    currency: str,
    name: str = "",
    unit_cost_amount: int | None = None,
    attributes: dict | None = None,
    status: str = ProductVariant.Status.ACTIVE,
    created_by: int | None = None,
) -> ProductVariant:
    """A variant of `product_id`, in the product's merchant; its SKU is unique among the merchant's
    live variants (409 SKU_TAKEN)."""
    attributes = {} if attributes is None else attributes
    _check_variant({"currency": currency, "price_amount": price_amount, "unit_cost_amount": unit_cost_amount, "attributes": attributes})
    with transaction.atomic(using=DB):
        product = Product.objects.select_for_update().filter(pk=product_id).first()
        if product is None:
            raise NotFound("No product has this id.")
        variant = ProductVariant(
            merchant_id=product.merchant_id,
            primary_product_id=product.id,
            sku=sku,
            name=name,
            price_amount=price_amount,
            currency=currency,
            unit_cost_amount=unit_cost_amount,
            attributes=attributes,
            status=status,
            created_by=created_by,
        )
        try:
            with transaction.atomic(using=DB):
                variant.save(using=DB, force_insert=True)
        except IntegrityError:
            raise _sku_taken() from None
        catalog_changed(product.merchant_id)
    return variant


def variant_update(*, variant_id: int, **changes) -> ProductVariant:
    """Change a variant's SKU, name, price, currency, unit cost, attributes or status (never its
    product or merchant)."""
    allowed = {"sku", "name", "price_amount", "currency", "unit_cost_amount", "attributes", "status"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    _check_variant(changes)
    with transaction.atomic(using=DB):
        variant = locked(ProductVariant, variant_id)
        save_fields(variant, apply_changes(variant, changes), conflict=_sku_taken())
        catalog_changed(variant.merchant_id)
    return variant


def variant_delete(*, variant_id: int) -> None:
    with transaction.atomic(using=DB):
        variant = locked(ProductVariant, variant_id)
        variant.delete(using=DB)
        catalog_changed(variant.merchant_id)
