"""Locations (the MERCHANT stream's default location, the operators' own) and items (one per
commerce variant, kept by the PRODUCT_VARIANT stream)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from apps.inventory.models import Item, Location, Stock
from apps.inventory.services.common import DB, DEFAULT_LOCATION_NAME, ForeignRecord, _locked, log
from merchant_platform.errors import Conflict, InvalidInput
from merchant_platform.money import MAX_AMOUNT

# --- Locations ------------------------------------------------------------------------------------


def location_ensure_default(*, merchant_id: int) -> Location:
    """The merchant's default location (spec 6.2 ensureDefaultLocation): created when missing,
    restored when soft-deleted, never duplicated. Concurrent replays meet on the partial unique index
    (`location_one_default`): the INSERT of the loser does nothing, then both lock the one row."""
    with transaction.atomic(using=DB):
        Location.all_objects.bulk_create(
            [Location(merchant_id=merchant_id, name=DEFAULT_LOCATION_NAME, code="DEFAULT", is_default=True)], ignore_conflicts=True
        )
        location = Location.all_objects.select_for_update(no_key=True).get(merchant_id=merchant_id, is_default=True)
        if location.deleted_at is not None:
            location.deleted_at = None
            location.save(using=DB, update_fields=["deleted_at", "updated_at"])
            log.info("inventory.default_location_restored", merchantId=str(merchant_id), locationId=str(location.id))
    return location


def _default_location_id(merchant_id: int) -> int:
    location_id = Location.objects.filter(merchant_id=merchant_id, is_default=True).values_list("id", flat=True).first()
    return location_id if location_id is not None else location_ensure_default(merchant_id=merchant_id).id


def location_create(*, merchant_id: int, name: str, code: str = "", created_by: int | None = None) -> Location:
    with transaction.atomic(using=DB):
        return Location.objects.create(merchant_id=merchant_id, name=name, code=code, created_by=created_by)


def location_update(*, location_id: int, **changes) -> Location:
    unknown = set(changes) - {"name", "code"}
    if unknown:
        raise InvalidInput({name: "This field cannot be changed." for name in sorted(unknown)})
    with transaction.atomic(using=DB):
        location = _locked(Location, location_id, name="location")
        for name, value in changes.items():
            setattr(location, name, value)
        location.save(using=DB, update_fields=[*changes, "updated_at"])
    return location


def location_delete(*, location_id: int) -> None:
    """Soft-delete a location that holds nothing (no unit on hand or reserved). A deleted default
    location comes back with the merchant's next change (location_ensure_default)."""
    with transaction.atomic(using=DB):
        location = _locked(Location, location_id, name="location")
        if Stock.objects.filter(location_id=location.id).filter(~Q(quantity_on_hand=0) | ~Q(reserved=0)).exists():
            raise Conflict("The location still holds stock: move or adjust it to zero first.", code="LOCATION_NOT_EMPTY")
        location.delete(using=DB)


# --- Items (PRODUCT_VARIANT stream) ---------------------------------------------------------------


def item_sync(
    *,
    variant_id: int,
    merchant_id: int,
    sku: str,
    name: str = "",
    product_id: int | None = None,
    active: bool = True,
    currency: str = "",
    unit_cost_amount: int | None = None,
) -> Item:
    """Create or update the item of a commerce variant (idempotent by `variant_id`). An inactive or
    deleted variant deactivates its item (stock and history stay). A variant known under another
    merchant is refused (ForeignRecord) and changes nothing. The variant's unit cost seeds
    the item's cost only while the item has none: purchase-order receipts own the moving average."""
    status = Item.Status.ACTIVE if active else Item.Status.INACTIVE
    if unit_cost_amount is not None and not 0 <= unit_cost_amount <= MAX_AMOUNT:
        raise InvalidInput({"unitCostAmount": f"Give 0 to {MAX_AMOUNT} minor units."})
    with transaction.atomic(using=DB):
        item = Item.all_objects.select_for_update(no_key=True).filter(variant_id=variant_id).first()
        if item is None:
            Item.all_objects.bulk_create(
                [
                    Item(
                        variant_id=variant_id,
                        merchant_id=merchant_id,
                        product_id=product_id,
                        sku=sku,
                        name=name,
                        status=status,
                        currency=currency,
                        unit_cost_amount=unit_cost_amount,
                        cost_currency=currency if unit_cost_amount is not None else "",
                    )
                ],
                ignore_conflicts=True,
            )
            item = Item.all_objects.select_for_update(no_key=True).get(variant_id=variant_id)
        if item.merchant_id != merchant_id:  # a record's merchant never changes through an event
            raise ForeignRecord(
                f"Variant {variant_id} is an item of another merchant than {merchant_id}.", extra={"variantId": str(variant_id)}
            )
        changes = {"product_id": product_id, "sku": sku, "name": name, "status": status}
        if currency:
            changes["currency"] = currency
        if item.unit_cost_amount is None and unit_cost_amount is not None:
            # A seeded cost is in the variant's currency; it then keeps that currency whatever the
            # variant's later currency (receipts own the cost from there).
            changes["unit_cost_amount"], changes["cost_currency"] = unit_cost_amount, currency or item.currency
        fields = [field for field, value in changes.items() if getattr(item, field) != value]
        for field in fields:
            setattr(item, field, changes[field])
        if fields:
            item.save(using=DB, update_fields=[*fields, "updated_at"])
    return item


def item_update(*, item_id: int, allow_oversell: bool) -> Item:
    with transaction.atomic(using=DB):
        item = _locked(Item, item_id, name="item")
        if item.allow_oversell != allow_oversell:
            item.allow_oversell = allow_oversell
            item.save(using=DB, update_fields=["allow_oversell", "updated_at"])
    return item
