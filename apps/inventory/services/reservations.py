"""Reservations of sale-order lines (commerce's internal API) and their expiry (the beat task)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.inventory.models import Item, Note, Operation, ReferenceType, Reservation, Tracking
from apps.inventory.services.common import DB, _items, _location, _lock_order, log
from apps.inventory.services.deductions import stock_deduct_order
from apps.inventory.services.locations import _default_location_id
from apps.inventory.services.stock import Change, _apply
from merchant_platform.errors import Conflict, InvalidInput, NotFound


def _order_merchant(order_id: str, merchant_id: int | None) -> int:
    """The merchant whose reservations of `order_id` a release or commit acts on: the one given,
    else the only merchant holding reservations under this reference (commerce's references are
    unique, so it need not name the merchant; two merchants under one reference must be told apart)."""
    if merchant_id is not None:
        return merchant_id
    merchants = sorted(set(Reservation.objects.filter(order_id=order_id).values_list("merchant_id", flat=True)))
    if not merchants:
        raise NotFound("No reservation holds this order.")
    if len(merchants) > 1:
        raise InvalidInput({"merchantId": "Several merchants hold reservations under this order id: give merchantId."})
    return merchants[0]


@dataclass(frozen=True)
class Line:
    line_id: str
    item_id: int
    quantity: int
    location_id: int | None = None


def _with_item_ids(lines: list[dict], *, merchant_id: int) -> list[dict]:
    """Lines naming a variant get its item's id (404 naming the variants inventory does not know yet:
    the PRODUCT_VARIANT stream has not brought them)."""
    variant_ids = {line["variant_id"] for line in lines if "variant_id" in line}
    if not variant_ids:
        return lines
    items = dict(Item.objects.filter(variant_id__in=variant_ids, merchant_id=merchant_id).values_list("variant_id", "id"))
    missing = sorted(variant_ids - items.keys())
    if missing:
        raise NotFound("No item of this merchant has this variant.", extra={"variantIds": [str(v) for v in missing]})
    return [_naming_item(line, items) for line in lines]


def _naming_item(line: dict, item_of_variant: dict[int, int]) -> dict:
    if "variant_id" not in line:
        return line
    named = {key: value for key, value in line.items() if key != "variant_id"}
    return {**named, "item_id": item_of_variant[line["variant_id"]]}


def reservation_reserve(*, order_id: str, merchant_id: int, lines: list[dict], ttl_seconds: int | None = None) -> list[Reservation]:
    """Reserve every line of a sale order, or none (INSUFFICIENT_STOCK). Idempotent by order and
    line: a repeated call with the same lines returns the existing reservations; a line reserved
    with another item or quantity is a 409 RESERVATION_MISMATCH. A line may name commerce's
    `variant_id` instead of `item_id`."""
    parsed = [Line(**line) for line in _with_item_ids(lines, merchant_id=merchant_id)]
    if not parsed:
        raise InvalidInput({"lines": "Give at least one line."})
    if len({line.line_id for line in parsed}) != len(parsed):
        raise InvalidInput({"lines": "Each lineId may appear once."})
    if any(line.quantity <= 0 for line in parsed):
        raise InvalidInput({"lines": "Every quantity must be a positive whole number."})
    ttl = ttl_seconds or settings.INVENTORY_RESERVATION_TTL_SECONDS
    with transaction.atomic(using=DB):
        _lock_order(merchant_id, order_id)
        existing = {r.line_id: r for r in Reservation.objects.filter(merchant_id=merchant_id, order_id=order_id)}
        if existing:
            for line in parsed:
                known = existing.get(line.line_id)
                if known is None or known.item_id != line.item_id or known.quantity != line.quantity:
                    raise Conflict("This order already holds other reservations.", code="RESERVATION_MISMATCH")
            return [existing[line.line_id] for line in parsed]
        items = _items({line.item_id for line in parsed}, merchant_id=merchant_id)
        inactive = [str(i.id) for i in items.values() if i.status != Item.Status.ACTIVE]
        if inactive:
            raise Conflict("An item is inactive.", code="ITEM_INACTIVE", extra={"itemIds": inactive})
        default = None
        changes = []
        for line in parsed:
            if line.location_id is None:
                default = default or _default_location_id(merchant_id)
                location_id = default
            else:
                location_id = _location(line.location_id, merchant_id=merchant_id).id
            changes.append(
                Change(
                    item=items[line.item_id],
                    location_id=location_id,
                    operation=Operation.RESERVE,
                    reference_type=ReferenceType.RESERVATION,
                    reference_id=order_id,
                    reference_line=line.line_id,
                    reserved_delta=line.quantity,
                )
            )
        tracking = _apply(changes)
        expires_at = timezone.now() + timedelta(seconds=ttl)
        reservations = [
            Reservation(
                merchant_id=merchant_id,
                order_id=order_id,
                line_id=line.line_id,
                item_id=line.item_id,
                location_id=row.location_id,
                stock_id=row.stock_id,
                quantity=line.quantity,
                expires_at=expires_at,
            )
            for line, row in zip(parsed, tracking, strict=True)
        ]
        Reservation.objects.bulk_create(reservations)
    return reservations


def _release(reservations: list[Reservation], *, status: str, note: str = "") -> int:
    active = [r for r in reservations if r.status == Reservation.Status.ACTIVE]
    if not active:
        return 0
    items = _items({r.item_id for r in active})
    _apply(
        [
            Change(
                item=items[r.item_id],
                location_id=r.location_id,
                operation=Operation.RELEASE,
                reference_type=ReferenceType.RESERVATION,
                reference_id=r.order_id,
                reference_line=r.line_id,
                reserved_delta=-r.quantity,
                note=note,
            )
            for r in active
        ]
    )
    Reservation.objects.filter(pk__in=[r.pk for r in active]).update(status=status, updated_at=timezone.now())
    return len(active)


def reservation_release(*, order_id: str, merchant_id: int | None = None, line_ids: list[str] | None = None) -> list[Reservation]:
    """Release the order's active reservations (or the named lines). Idempotent: released,
    committed or expired lines are left as they are."""
    with transaction.atomic(using=DB):
        merchant_id = _order_merchant(order_id, merchant_id)
        _lock_order(merchant_id, order_id)
        reservations = list(Reservation.objects.select_for_update().filter(merchant_id=merchant_id, order_id=order_id).order_by("pk"))
        if not reservations:
            raise NotFound("No reservation holds this order.")
        if line_ids is not None:
            unknown = set(line_ids) - {r.line_id for r in reservations}
            if unknown:
                raise NotFound("No reservation holds these lines.", extra={"lineIds": sorted(unknown)})
            reservations = [r for r in reservations if r.line_id in set(line_ids)]
        _release(reservations, status=Reservation.Status.RELEASED)
    return list(Reservation.objects.filter(pk__in=[r.pk for r in reservations]))


def reservation_commit(*, order_id: str, merchant_id: int | None = None) -> list[Tracking]:
    """Deduct the order's reserved lines now (the sale is final): the same deduction payment.success
    makes, so whichever comes second finds the tracking rows and does nothing."""
    with transaction.atomic(using=DB):
        merchant_id = _order_merchant(order_id, merchant_id)
        _lock_order(merchant_id, order_id)
        reservations = list(
            Reservation.objects.filter(merchant_id=merchant_id, order_id=order_id).exclude(status=Reservation.Status.RELEASED)
        )
        if not reservations:
            raise NotFound("No reservation holds this order.")
        if any(r.status == Reservation.Status.EXPIRED for r in reservations):
            raise Conflict("A reservation of this order has expired: reserve again.", code="RESERVATION_EXPIRED")
        lines = [{"line_id": r.line_id, "item_id": r.item_id, "quantity": r.quantity} for r in reservations]
        return stock_deduct_order(order_id=order_id, merchant_id=merchant_id, lines=lines)


def reservations_expire(*, now=None, limit: int = 500) -> int:
    """Release reservations past their expiry (the beat task). Each order in its own transaction."""
    now = now or timezone.now()
    orders = list(
        Reservation.objects.filter(status=Reservation.Status.ACTIVE, expires_at__lte=now)
        .order_by("expires_at")
        .values_list("merchant_id", "order_id")[:limit]
    )
    released = 0
    for merchant_id, order_id in dict.fromkeys(orders):
        with transaction.atomic(using=DB):
            _lock_order(merchant_id, order_id)
            due = list(
                Reservation.objects.select_for_update()
                .filter(merchant_id=merchant_id, order_id=order_id, status=Reservation.Status.ACTIVE, expires_at__lte=now)
                .order_by("pk")
            )
            released += _release(due, status=Reservation.Status.EXPIRED, note=Note.RESERVATION_EXPIRED)
    if released:
        log.info("inventory.reservations_expired", count=released)
    return released
