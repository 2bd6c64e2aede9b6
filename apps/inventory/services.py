"""Every write of the inventory service. Functions take ids and keyword arguments, run in one
transaction on inventory's alias and raise the kernel's errors, so the API, the internal API, the
consumers, the beat task and the admin share the same rules.

The stock-change core (`_apply`) is the only code that changes stock: it locks the stock rows a
change touches in primary-key order (one `SELECT ... ORDER BY id FOR UPDATE`), applies the changes,
writes one immutable tracking row each and never lets available stock cross zero on an item without
allowOversell. Lock order across the service: the order's advisory lock, then items, then stock rows,
so concurrent writers queue instead of deadlocking (docs/architecture.md section 10). Rows are locked FOR
NO KEY UPDATE: writers still exclude each other, but inserts that reference a locked row (tracking,
stock, reservations: their foreign-key checks take KEY SHARE) are not blocked, which with FOR UPDATE
deadlocked a receipt (item locked, waiting for a stock row) against a deduction (stock row locked,
inserting tracking that references the item).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from apps.inventory.models import (
    Item,
    Location,
    Note,
    Operation,
    PurchaseOrder,
    PurchaseOrderLine,
    PurchaseOrderReceipt,
    ReferenceType,
    Reservation,
    Stock,
    Ticket,
    Tracking,
)
from merchant_platform import snowflake
from merchant_platform.db import copy_insert
from merchant_platform.errors import ApiError, Conflict, InvalidInput, NotFound
from merchant_platform.logging import get_logger
from merchant_platform.messaging import publish, publish_many, topics
from merchant_platform.money import AMOUNT_TOO_LARGE, MAX_AMOUNT, MAX_QUANTITY

DB = "inventory"
DEFAULT_LOCATION_NAME = "Default"
# Lines of one purchase order (and so of one receipt, one purchase-order.received event): a received
# line is about 350 bytes of JSON, so the largest event stays near 200 KB, far below the producer's
# 1 MiB (3,000 lines passed it and blocked the outbox).
MAX_LINES = 500
log = get_logger(__name__)


class InsufficientStock(Conflict):
    def __init__(self, detail: str, *, extra: dict | None = None):
        super().__init__(detail, code="INSUFFICIENT_STOCK", extra=extra)


class AmountTooLarge(ApiError):
    def __init__(self, detail: str, *, field: str):
        super().__init__(detail, code=AMOUNT_TOO_LARGE, status_code=400, extra={"field": field, "maxAmount": MAX_AMOUNT})


class QuantityLimitExceeded(Conflict):
    def __init__(self, detail: str, *, extra: dict):
        super().__init__(detail, code="QUANTITY_LIMIT_EXCEEDED", extra={**extra, "maxQuantity": MAX_QUANTITY})


def _check_amount(value: int, *, field: str) -> None:
    if abs(value) > MAX_AMOUNT:
        raise AmountTooLarge(f"{field} is {value}: at most {MAX_AMOUNT} minor units.", field=field)


class CurrencyMismatch(Conflict):
    """A purchase-order line in another currency than the item's cost while the item holds stock:
    averaging the two would mix currencies."""

    def __init__(self, mismatches: list[dict]):
        super().__init__(
            "A purchase-order line is in another currency than its item's unit cost while the item holds stock.",
            code="CURRENCY_MISMATCH",
            extra={"lines": mismatches},
        )


def _currency_mismatches(items: dict[int, Item], lines: list[dict], currency: str) -> None:
    """Refuse (CURRENCY_MISMATCH, naming each line by index and item) the lines whose item holds a
    cost in another currency than `currency` while any unit of it is on hand."""
    costed = {item_id for item_id, item in items.items() if item.unit_cost_amount is not None and item.cost_currency not in ("", currency)}
    in_stock = set(
        Stock.objects.filter(item_id__in=costed)
        .values("item_id")
        .annotate(total=Sum("quantity_on_hand"))
        .filter(total__gt=0)
        .values_list("item_id", flat=True)
    )
    mismatches = [
        {
            "index": index,
            "inventoryItemId": str(line["item_id"]),
            "costCurrency": items[line["item_id"]].cost_currency,
            "currency": currency,
        }
        for index, line in enumerate(lines)
        if line["item_id"] in in_stock
    ]
    if mismatches:
        raise CurrencyMismatch(mismatches)


class ForeignRecord(NotFound):
    """An event names a record that belongs to another merchant (or a location that does not
    exist): no retry can make it right. Over HTTP it is a 404 like any record the caller cannot
    see; the consumers park the event with this reason."""

    def __init__(self, detail: str, *, extra: dict | None = None):
        super().__init__(detail, code="FOREIGN_RECORD", extra=extra)


def _locked(model, pk: int, *, name: str):
    """The row, locked FOR NO KEY UPDATE: what an UPDATE of non-key columns takes anyway, and it
    lets inserts that reference the row (their foreign-key check takes KEY SHARE) go on."""
    instance = model.objects.select_for_update(no_key=True).filter(pk=pk).first()
    if instance is None:
        raise NotFound(f"No {name} has this id.")
    return instance


def _illegal(entity: str, status: str, verb: str) -> Conflict:
    return Conflict(f"A {entity} in status {status} cannot be {verb}.", code="ILLEGAL_TRANSITION", extra={"currentStatus": status})


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


# --- The stock-change core ------------------------------------------------------------------------

BLOCK, RAISE, ALLOW = "block", "raise", "allow"


@dataclass
class Change:
    """One change of one stock row. `on_shortage`: what happens when the change would leave available
    stock below zero on an item without allowOversell: BLOCK writes a tracking row with delta 0 and
    note OVERSELL_BLOCKED; RAISE refuses the whole operation (INSUFFICIENT_STOCK); ALLOW applies it
    (a cycle count records what is there)."""

    item: Item
    location_id: int
    operation: str
    reference_type: str
    reference_id: str
    reference_line: str = ""
    delta: int = 0
    reserved_delta: int = 0
    on_shortage: str = RAISE
    note: str = ""
    reason: str = ""
    unit_cost_amount: int | None = None  # with cost_currency; default: the item's cost
    cost_currency: str = ""


def _ensure_stock_rows(pairs: list[tuple[int, int, int]]) -> None:
    """Create the missing (item, location) stock rows before any row is locked, in key order, so
    two creators of the same rows wait for each other instead of crossing."""
    wanted = sorted(set(pairs))
    existing = set(
        Stock.objects.filter(item_id__in={p[0] for p in wanted}, location_id__in={p[1] for p in wanted}).values_list(
            "item_id", "location_id"
        )
    )
    missing = [Stock(item_id=i, location_id=loc, merchant_id=m) for i, loc, m in wanted if (i, loc) not in existing]
    if missing:
        Stock.objects.bulk_create(missing, ignore_conflicts=True)


def _apply(changes: list[Change], *, created_by: int | None = None) -> list[Tracking]:
    """Apply `changes` atomically (the caller holds a transaction on DB): lock the stock rows in
    primary-key order, check each change, update the rows, write the tracking rows."""
    if not changes:
        return []
    _ensure_stock_rows([(c.item.id, c.location_id, c.item.merchant_id) for c in changes])
    item_ids, location_ids = {c.item.id for c in changes}, {c.location_id for c in changes}
    rows = Stock.objects.select_for_update(no_key=True).filter(item_id__in=item_ids, location_id__in=location_ids).order_by("pk")
    stocks = {(s.item_id, s.location_id): s for s in rows}
    touched: dict[int, Stock] = {}
    tracking: list[Tracking] = []
    for change in changes:
        stock = stocks[(change.item.id, change.location_id)]
        on_hand, reserved = stock.quantity_on_hand + change.delta, stock.reserved + change.reserved_delta
        note = change.note
        delta, reserved_delta = change.delta, change.reserved_delta
        if reserved < 0:
            raise Conflict("The change would release more than is reserved.", code="RESERVATION_MISMATCH")
        if max(abs(on_hand), reserved) > MAX_QUANTITY and change.on_shortage != BLOCK:
            raise QuantityLimitExceeded(
                f"The change would take the stock of {change.item.sku} past {MAX_QUANTITY} units.",
                extra={"itemId": str(change.item.id), "quantityOnHand": stock.quantity_on_hand, "reserved": stock.reserved},
            )
        shrinks = (delta - reserved_delta) < 0  # available goes down
        past_limit = abs(on_hand) > MAX_QUANTITY  # only a deduction (BLOCK) gets here past it: blocked
        if past_limit or (shrinks and on_hand - reserved < 0 and not change.item.allow_oversell and change.on_shortage != ALLOW):
            if change.on_shortage == RAISE:
                raise InsufficientStock(
                    f"Not enough stock of {change.item.sku}: {stock.quantity_on_hand - stock.reserved} available.",
                    extra={"itemId": str(change.item.id), "available": stock.quantity_on_hand - stock.reserved},
                )
            on_hand, reserved, delta, reserved_delta, note = stock.quantity_on_hand, stock.reserved, 0, 0, Note.OVERSELL_BLOCKED
        elif shrinks and on_hand < 0 and not note:
            note = Note.OVERSOLD
        stock.quantity_on_hand, stock.reserved = on_hand, reserved
        if delta or reserved_delta:
            touched[stock.pk] = stock
        tracking.append(
            Tracking(
                merchant_id=change.item.merchant_id,
                item_id=change.item.id,
                location_id=change.location_id,
                stock_id=stock.pk,
                operation=change.operation,
                delta=delta,
                reserved_delta=reserved_delta,
                requested=abs(change.delta) or abs(change.reserved_delta),
                quantity_after=on_hand,
                reserved_after=reserved,
                reference_type=change.reference_type,
                reference_id=change.reference_id,
                reference_line=change.reference_line,
                note=note,
                reason=change.reason,
                unit_cost_amount=change.unit_cost_amount if change.unit_cost_amount is not None else change.item.unit_cost_amount,
                cost_currency=change.cost_currency if change.unit_cost_amount is not None else change.item.cost_currency,
                created_by=created_by,
            )
        )
    if touched:
        _write_quantities(list(touched.values()))
    try:
        with transaction.atomic(using=DB):
            copy_insert(tracking, using=DB)
    except IntegrityError:
        raise Conflict("This change was already recorded.", code="ALREADY_APPLIED") from None
    return tracking


def _write_quantities(stocks: list[Stock]) -> None:
    """One UPDATE of on hand and reserved for every given (locked) stock row, the values passed as
    arrays: Django's bulk_update builds a CASE WHEN per row and column, which cost a batch of 1,500
    rows more CPU than everything else of the deduction."""
    now = timezone.now()
    connection = connections[DB]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {connection.ops.quote_name(Stock._meta.db_table)} AS stock "  # noqa: S608  (quoted table name, values bound)
            "SET quantity_on_hand = changed.on_hand, reserved = changed.reserved, updated_at = %s "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS changed (id, on_hand, reserved) WHERE stock.id = changed.id",
            [now, [s.pk for s in stocks], [s.quantity_on_hand for s in stocks], [s.reserved for s in stocks]],
        )
    for stock in stocks:
        stock.updated_at = now


def _items(item_ids: set[int], *, merchant_id: int | None = None) -> dict[int, Item]:
    items = {item.id: item for item in Item.objects.filter(pk__in=item_ids)}
    missing = sorted(i for i in item_ids if i not in items or (merchant_id is not None and items[i].merchant_id != merchant_id))
    if missing:
        raise NotFound("No item has this id.", extra={"itemIds": [str(i) for i in missing]})
    return items


def _location(location_id: int, *, merchant_id: int) -> Location:
    location = Location.objects.filter(pk=location_id, merchant_id=merchant_id).first()
    if location is None:
        raise NotFound("No location of this merchant has this id.")
    return location


def _value(quantity: int, unit_cost: int | None) -> int:
    return quantity * (unit_cost or 0)


def _adjustment_event(tracking: list[Tracking], *, kind: str, reference_id: str, reason: str) -> None:
    """What finance turns into an INVENTORY_ADJUSTMENT voucher (docs/events.md)."""
    rows = [t for t in tracking if t.delta]
    if not rows:
        return
    for row in rows:
        _check_amount(_value(row.delta, row.unit_cost_amount), field="delta")
    first = rows[0]
    lines = [
        {
            "itemId": str(t.item_id),
            "locationId": str(t.location_id),
            "quantityDelta": t.delta,
            "unitCostAmount": t.unit_cost_amount,
            "valueAmount": _value(t.delta, t.unit_cost_amount),
            "trackingId": str(t.id),
        }
        for t in rows
    ]
    items = {i.id: i for i in Item.objects.filter(pk__in={t.item_id for t in rows})}
    publish(
        topics.INVENTORY_ADJUSTED.name,
        {
            "kind": kind,
            "referenceId": reference_id,
            "merchantId": str(first.merchant_id),
            "currency": first.cost_currency or items[first.item_id].currency,
            "reason": reason,
            "totalValueAmount": sum(line["valueAmount"] for line in lines),
            "lines": lines,
        },
        event_type="inventory.stock-adjusted",
        key=first.merchant_id,
        using=DB,
    )


# --- Adjustments ----------------------------------------------------------------------------------


def stock_adjust(
    *,
    item_id: int,
    delta: int,
    reason: str,
    location_id: int | None = None,
    created_by: int | None = None,
) -> Tracking:
    """A manual correction of on hand (`delta`, not zero) with a reason. It may not leave available
    stock below zero unless the item allows overselling. Publishes inventory.stock-adjusted."""
    if delta == 0:
        raise InvalidInput({"delta": "Give a non-zero change."})
    with transaction.atomic(using=DB):
        item = _items({item_id})[item_id]
        location_id = location_id if location_id is not None else _default_location_id(item.merchant_id)
        _location(location_id, merchant_id=item.merchant_id)
        reference = str(snowflake.next_id())
        (row,) = _apply(
            [
                Change(
                    item=item,
                    location_id=location_id,
                    operation=Operation.ADJUST,
                    reference_type=ReferenceType.ADJUSTMENT,
                    reference_id=reference,
                    delta=delta,
                    reason=reason,
                )
            ],
            created_by=created_by,
        )
        _adjustment_event([row], kind="ADJUSTMENT", reference_id=reference, reason=reason)
    return row


# --- Reservations (commerce's internal API) -------------------------------------------------------


def _order_lock_key(merchant_id: int, order_id: str) -> int:
    """The advisory-lock key of one merchant's sale order: order references are the merchant's,
    so two merchants' orders with the same reference do not serialise on each other."""
    return zlib.crc32(f"inventory.order:{merchant_id}:{order_id}".encode()) - 2**31


def _lock_order(merchant_id: int, order_id: str) -> None:
    """Serialise every operation on one sale order (reserve, release, commit, deduct) in this
    transaction: a transaction-level advisory lock, taken before any row lock."""
    with connections[DB].cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [0x494E56, _order_lock_key(merchant_id, order_id)])


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


# --- Deduction on payment (spec 6.2) --------------------------------------------------------------


def stock_deduct_order(*, order_id: str, merchant_id: int, lines: list[dict]) -> list[Tracking]:
    """Deduct each line of one paid sale order once: stock_deduct_orders for one order."""
    return stock_deduct_orders(orders=[{"order_id": order_id, "merchant_id": merchant_id, "lines": lines}])


def stock_deduct_orders(*, orders: list[dict]) -> list[Tracking]:
    """Deduct each line of paid sale orders once (idempotent by order and line: a line with a DEDUCT
    tracking row, or repeated in `orders`, is skipped). A line with an active reservation converts
    it. A line that would leave available stock below zero on an item without allowOversell is
    blocked: tracked with delta 0 and note OVERSELL_BLOCKED (spec 7). Publishes inventory.cogs per
    order for what was deducted. Each order: order_id, merchant_id, lines; each line: line_id,
    item_id or variant_id, quantity, optional location_id. The orders are handled together (a
    consumer's batch): a fixed number of statements whatever their count. Every key is the
    merchant's: another merchant's order with the same reference neither counts as this one's
    deduction nor converts its reservations. An order without lines deducts nothing."""
    orders = [order for order in orders if order["lines"]]
    if not orders:
        return []
    with transaction.atomic(using=DB):
        order_keys = sorted({(order["merchant_id"], order["order_id"]) for order in orders})
        order_ids, merchant_ids = {order_id for _, order_id in order_keys}, {merchant_id for merchant_id, _ in order_keys}
        _lock_orders(order_keys)
        seen = {
            key
            for key in Tracking.objects.filter(
                merchant_id__in=merchant_ids,
                operation=Operation.DEDUCT,
                reference_type=ReferenceType.SALE_ORDER,
                reference_id__in=order_ids,
            ).values_list("merchant_id", "reference_id", "reference_line")
        }
        todo: list[tuple[dict, dict]] = []
        for order in orders:
            for line in order["lines"]:
                key = (order["merchant_id"], order["order_id"], line["line_id"])
                if key not in seen:
                    seen.add(key)
                    todo.append((order, dict(line)))
        if not todo:
            log.info("inventory.deduction_replay", orderIds=sorted(order_ids))
            return []
        items = _paid_items(todo)
        defaults = _default_locations({order["merchant_id"] for order, line in todo if line.get("location_id") is None})
        named = {line["location_id"] for _, line in todo if line.get("location_id") is not None}
        owners = dict(Location.objects.filter(pk__in=named).values_list("id", "merchant_id"))
        reservations = {
            (r.merchant_id, r.order_id, r.line_id): r
            for r in Reservation.objects.select_for_update(no_key=True)
            .filter(merchant_id__in=merchant_ids, order_id__in=order_ids, status=Reservation.Status.ACTIVE)
            .order_by("pk")
        }
        changes, converted = [], []
        for order, line in todo:
            item, quantity = items[line["item_id"]], line["quantity"]
            reservation = reservations.get((order["merchant_id"], order["order_id"], line["line_id"]))
            if reservation is not None and reservation.item_id == item.id:
                location_id, reserved_delta, note = reservation.location_id, -reservation.quantity, Note.RESERVATION_CONVERTED
                converted.append(reservation.pk)
            else:
                location_id = line.get("location_id")
                if location_id is None:
                    location_id = defaults[order["merchant_id"]]
                elif owners.get(location_id) != order["merchant_id"]:
                    raise ForeignRecord(
                        f"Order {order['order_id']} of merchant {order['merchant_id']} names location {location_id}, "
                        "which is not this merchant's (another merchant's or none).",
                        extra={"locationId": str(location_id)},
                    )
                reserved_delta, note = 0, ""
            changes.append(
                Change(
                    item=item,
                    location_id=location_id,
                    operation=Operation.DEDUCT,
                    reference_type=ReferenceType.SALE_ORDER,
                    reference_id=order["order_id"],
                    reference_line=line["line_id"],
                    delta=-quantity,
                    reserved_delta=reserved_delta,
                    on_shortage=BLOCK,
                    note=note,
                )
            )
        tracking = _apply(changes)
        if converted:
            Reservation.objects.filter(pk__in=converted).update(status=Reservation.Status.COMMITTED, updated_at=timezone.now())
        for row in tracking:
            if row.note == Note.OVERSELL_BLOCKED:
                log.warning("inventory.oversell_blocked", orderId=row.reference_id, itemId=str(row.item_id), requested=row.requested)
        _cogs_events(tracking, items)
    return tracking


def _lock_orders(order_keys: list[tuple[int, str]]) -> None:
    """_lock_order for several (merchant, order) pairs, in key order (one statement): two batches
    sharing orders queue instead of crossing."""
    keys = sorted({_order_lock_key(merchant_id, order_id) for merchant_id, order_id in order_keys})
    with connections[DB].cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(%s, k)) FROM (SELECT unnest(%s::integer[]) AS k ORDER BY 1 OFFSET 0) AS keys",
            [0x494E56, keys],
        )


def _paid_items(todo: list[tuple[dict, dict]]) -> dict[int, Item]:
    """The items of paid lines (by item_id, or by variant_id within the order's merchant); sets
    each line's item_id. A variant inventory does not know (yet) is a NotFound: the consumer retries."""
    variant_ids = {line["variant_id"] for _, line in todo if line.get("item_id") is None}
    by_variant = {i.variant_id: i for i in Item.objects.filter(variant_id__in=variant_ids)}
    items = {i.id: i for i in Item.objects.filter(pk__in={line["item_id"] for _, line in todo if line.get("item_id") is not None})}
    missing, foreign = [], []
    for order, line in todo:
        item = items.get(line["item_id"]) if line.get("item_id") is not None else by_variant.get(line["variant_id"])
        if item is None:
            missing.append(str(line.get("variant_id") or line.get("item_id")))
            continue
        if item.merchant_id != order["merchant_id"]:
            foreign.append(
                f"{line.get('variant_id') or line.get('item_id')} in order {order['order_id']} of merchant {order['merchant_id']}"
            )
            continue
        line["item_id"] = item.id
        items[item.id] = item
    if foreign:
        raise ForeignRecord(f"Variants or items of another merchant: {'; '.join(sorted(set(foreign)))}.")
    if missing:
        raise NotFound("No item of this merchant has this variant or id.", extra={"ids": sorted(set(missing))})
    return items


def _default_locations(merchant_ids: set[int]) -> dict[int, int]:
    found = dict(Location.objects.filter(merchant_id__in=merchant_ids, is_default=True).values_list("merchant_id", "id"))
    for merchant_id in sorted(merchant_ids - set(found)):
        found[merchant_id] = location_ensure_default(merchant_id=merchant_id).id
    return found


def _cogs_events(tracking: list[Tracking], items: dict[int, Item]) -> None:
    """One inventory.cogs event per order and cost currency (the currency of the items' unit costs,
    not the sale's), for the lines actually deducted (docs/events.md), keyed by the order; one
    INSERT into the outbox for all of them."""
    by_order: dict[tuple[int, str, str], list[Tracking]] = {}
    for row in tracking:
        if row.delta:
            currency = row.cost_currency or items[row.item_id].currency
            by_order.setdefault((row.merchant_id, row.reference_id, currency), []).append(row)
    events = [
        (
            order_id,
            {
                "orderId": order_id,
                "merchantId": str(rows[0].merchant_id),
                "currency": currency,
                "totalCostAmount": sum(_value(-t.delta, t.unit_cost_amount) for t in rows),
                "lines": [
                    {
                        "lineId": t.reference_line,
                        "itemId": str(t.item_id),
                        "variantId": str(items[t.item_id].variant_id),
                        "locationId": str(t.location_id),
                        "quantity": -t.delta,
                        "unitCostAmount": t.unit_cost_amount,
                        "costAmount": _value(-t.delta, t.unit_cost_amount),
                    }
                    for t in rows
                ],
            },
        )
        for (_, order_id, currency), rows in by_order.items()
    ]
    publish_many(topics.INVENTORY_COGS.name, events, event_type="inventory.cogs", using=DB)


# --- Cycle counts ---------------------------------------------------------------------------------


def ticket_create(*, item_id: int, location_id: int | None = None, note: str = "", created_by: int | None = None) -> Ticket:
    with transaction.atomic(using=DB):
        item = _items({item_id})[item_id]
        location_id = location_id if location_id is not None else _default_location_id(item.merchant_id)
        _location(location_id, merchant_id=item.merchant_id)
        return Ticket.objects.create(merchant_id=item.merchant_id, item=item, location_id=location_id, note=note, created_by=created_by)


def ticket_count(*, ticket_id: int, counted_quantity: int) -> Ticket:
    """Record the counted quantity (OPEN or COUNTED -> COUNTED: a recount replaces it)."""
    if counted_quantity < 0:
        raise InvalidInput({"countedQuantity": "Give a whole number from 0."})
    with transaction.atomic(using=DB):
        ticket = _locked(Ticket, ticket_id, name="ticket")
        if ticket.status not in (Ticket.Status.OPEN, Ticket.Status.COUNTED):
            raise _illegal("ticket", ticket.status, "counted")
        ticket.counted_quantity, ticket.status = counted_quantity, Ticket.Status.COUNTED
        ticket.save(using=DB, update_fields=["counted_quantity", "status", "updated_at"])
    return ticket


def ticket_apply(*, ticket_id: int, created_by: int | None = None) -> Ticket:
    """COUNTED -> APPLIED: set on hand to the count, tracked as a CYCLE_COUNT change of the
    difference (ADJUSTMENT_NEUTRAL when the count matches); publishes inventory.stock-adjusted."""
    with transaction.atomic(using=DB):
        ticket = _locked(Ticket, ticket_id, name="ticket")
        if ticket.status != Ticket.Status.COUNTED:
            raise _illegal("ticket", ticket.status, "applied")
        item = _items({ticket.item_id})[ticket.item_id]
        _ensure_stock_rows([(item.id, ticket.location_id, item.merchant_id)])
        stock = Stock.objects.select_for_update(no_key=True).get(item_id=item.id, location_id=ticket.location_id)
        difference = ticket.counted_quantity - stock.quantity_on_hand
        (row,) = _apply(
            [
                Change(
                    item=item,
                    location_id=ticket.location_id,
                    operation=Operation.COUNT,
                    reference_type=ReferenceType.CYCLE_COUNT,
                    reference_id=str(ticket.id),
                    delta=difference,
                    on_shortage=ALLOW,
                    note=Note.ADJUSTMENT_NEUTRAL if difference == 0 else "",
                    reason=ticket.note,
                )
            ],
            created_by=created_by,
        )
        ticket.expected_quantity, ticket.difference, ticket.status = row.quantity_after - row.delta, row.delta, Ticket.Status.APPLIED
        ticket.save(using=DB, update_fields=["expected_quantity", "difference", "status", "updated_at"])
        _adjustment_event([row], kind="CYCLE_COUNT", reference_id=str(ticket.id), reason=ticket.note)
    return ticket


def ticket_cancel(*, ticket_id: int) -> Ticket:
    with transaction.atomic(using=DB):
        ticket = _locked(Ticket, ticket_id, name="ticket")
        if ticket.status not in (Ticket.Status.OPEN, Ticket.Status.COUNTED):
            raise _illegal("ticket", ticket.status, "cancelled")
        ticket.status = Ticket.Status.CANCELLED
        ticket.save(using=DB, update_fields=["status", "updated_at"])
    return ticket


# --- Purchase orders ------------------------------------------------------------------------------


def purchase_order_create(
    *,
    merchant_id: int,
    supplier: str,
    currency: str,
    lines: list[dict],
    location_id: int | None = None,
    created_by: int | None = None,
) -> PurchaseOrder:
    """A DRAFT purchase order. Lines: item_id, quantity (> 0), unit_cost_amount (minor units); at
    most MAX_LINES (one receipt of them all is one event, which must stay far below 1 MiB)."""
    if not lines:
        raise InvalidInput({"lines": "Give at least one line."})
    if len(lines) > MAX_LINES:
        raise InvalidInput({"lines": f"Give at most {MAX_LINES} lines."})
    if len({line["item_id"] for line in lines}) != len(lines):
        raise InvalidInput({"lines": "Each item may appear once."})
    for index, line in enumerate(lines):
        _check_amount(line["unit_cost_amount"], field=f"lines[{index}].unitCostAmount")
        _check_amount(line["quantity"] * line["unit_cost_amount"], field=f"lines[{index}]")
    _check_amount(sum(line["quantity"] * line["unit_cost_amount"] for line in lines), field="lines")
    with transaction.atomic(using=DB):
        items = _items({line["item_id"] for line in lines}, merchant_id=merchant_id)
        _currency_mismatches(items, lines, currency)
        location_id = location_id if location_id is not None else _default_location_id(merchant_id)
        _location(location_id, merchant_id=merchant_id)
        order = PurchaseOrder.objects.create(
            merchant_id=merchant_id, supplier=supplier, currency=currency, location_id=location_id, created_by=created_by
        )
        PurchaseOrderLine.objects.bulk_create(
            [
                PurchaseOrderLine(
                    purchase_order=order,
                    item_id=line["item_id"],
                    quantity_ordered=line["quantity"],
                    unit_cost_amount=line["unit_cost_amount"],
                )
                for line in lines
            ]
        )
    return order


def purchase_order_place(*, purchase_order_id: int) -> PurchaseOrder:
    """DRAFT -> ORDERED."""
    with transaction.atomic(using=DB):
        order = _locked(PurchaseOrder, purchase_order_id, name="purchase order")
        if order.status != PurchaseOrder.Status.DRAFT:
            raise _illegal("purchase order", order.status, "ordered")
        order.status, order.ordered_at = PurchaseOrder.Status.ORDERED, timezone.now()
        order.save(using=DB, update_fields=["status", "ordered_at", "updated_at"])
    return order


def purchase_order_cancel(*, purchase_order_id: int) -> PurchaseOrder:
    """DRAFT or ORDERED -> CANCELLED (nothing received yet)."""
    with transaction.atomic(using=DB):
        order = _locked(PurchaseOrder, purchase_order_id, name="purchase order")
        if order.status not in (PurchaseOrder.Status.DRAFT, PurchaseOrder.Status.ORDERED):
            raise _illegal("purchase order", order.status, "cancelled")
        order.status = PurchaseOrder.Status.CANCELLED
        order.save(using=DB, update_fields=["status", "updated_at"])
    return order


def _moving_average(old_quantity: int, old_cost: int | None, quantity: int, cost: int) -> int:
    old_quantity = max(old_quantity, 0)
    if old_cost is None or old_quantity == 0:
        return cost
    total = Decimal(old_quantity * old_cost + quantity * cost) / Decimal(old_quantity + quantity)
    return int(total.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def purchase_order_receive(
    *,
    purchase_order_id: int,
    receipt_id: str,
    lines: list[dict],
    allow_over_receipt: bool = False,
    created_by: int | None = None,
) -> PurchaseOrder:
    """Receive goods (full or partial) once per `receipt_id`: adds stock at the order's location,
    updates each item's moving-average unit cost, moves the order to PARTIALLY_RECEIVED or RECEIVED
    and publishes purchase-order.received with the received snapshot once the transaction commits
    (through the outbox: a broker down at commit time delays the event, never loses it).
    A quantity over what is still open is refused unless `allow_over_receipt`."""
    if not lines:
        raise InvalidInput({"lines": "Give at least one line."})
    if len(lines) > MAX_LINES:
        raise InvalidInput({"lines": f"Give at most {MAX_LINES} lines."})
    if len({line["item_id"] for line in lines}) != len(lines):
        raise InvalidInput({"lines": "Each item may appear once."})
    if any(line["quantity"] <= 0 for line in lines):
        raise InvalidInput({"lines": "Every quantity must be a positive whole number."})
    with transaction.atomic(using=DB):
        order = _locked(PurchaseOrder, purchase_order_id, name="purchase order")
        if PurchaseOrderReceipt.objects.filter(purchase_order=order, receipt_id=receipt_id).exists():
            log.info("inventory.receipt_replay", purchaseOrderId=str(order.id), receiptId=receipt_id)
            return order
        if order.status not in (PurchaseOrder.Status.ORDERED, PurchaseOrder.Status.PARTIALLY_RECEIVED):
            raise _illegal("purchase order", order.status, "received")
        order_lines = {
            line.item_id: line for line in PurchaseOrderLine.objects.select_for_update().filter(purchase_order=order).order_by("pk")
        }
        unknown = sorted(line["item_id"] for line in lines if line["item_id"] not in order_lines)
        if unknown:
            raise InvalidInput({"lines": f"Items not on this purchase order: {', '.join(str(i) for i in unknown)}."})
        over = [str(line["item_id"]) for line in lines if line["quantity"] > order_lines[line["item_id"]].quantity_open]
        if over and not allow_over_receipt:
            raise InvalidInput({"lines": f"More than ordered for items {', '.join(over)} (set allowOverReceipt to accept it)."})
        past = [str(line["item_id"]) for line in lines if order_lines[line["item_id"]].quantity_received + line["quantity"] > MAX_QUANTITY]
        if past:
            raise QuantityLimitExceeded(f"The receipt would take the received quantity past {MAX_QUANTITY} units.", extra={"itemIds": past})
        # Items first (moving average over every location), then their stock rows: the global lock order.
        # FOR NO KEY UPDATE: a concurrent deduction holding a stock row inserts tracking rows whose
        # foreign key takes KEY SHARE on the item; FOR UPDATE would block it and deadlock.
        items = {
            i.id: i for i in Item.objects.select_for_update(no_key=True).filter(pk__in=[line["item_id"] for line in lines]).order_by("pk")
        }
        on_hand = dict(
            Stock.objects.filter(item_id__in=items)
            .values("item_id")
            .annotate(total=Sum("quantity_on_hand"))
            .values_list("item_id", "total")
        )
        _currency_mismatches(items, lines, order.currency)
        changes, snapshot = [], []
        for line in sorted(lines, key=lambda line: line["item_id"]):
            item, order_line, quantity = items[line["item_id"]], order_lines[line["item_id"]], line["quantity"]
            # Stock gone (or no cost yet): the receipt's cost and currency start afresh; else the
            # currencies agree (checked above) and the average is over one currency.
            new_cost = _moving_average(on_hand.get(item.id, 0), item.unit_cost_amount, quantity, order_line.unit_cost_amount)
            if new_cost != item.unit_cost_amount or item.cost_currency != order.currency:
                item.unit_cost_amount, item.cost_currency = new_cost, order.currency
                item.currency = item.currency or order.currency
                item.save(using=DB, update_fields=["unit_cost_amount", "cost_currency", "currency", "updated_at"])
            order_line.quantity_received += quantity
            order_line.save(using=DB, update_fields=["quantity_received", "updated_at"])
            changes.append(
                Change(
                    item=item,
                    location_id=order.location_id,
                    operation=Operation.RECEIVE,
                    reference_type=ReferenceType.PURCHASE_ORDER,
                    reference_id=str(order.id),
                    reference_line=f"{receipt_id}:{item.id}",
                    delta=quantity,
                    unit_cost_amount=order_line.unit_cost_amount,
                    cost_currency=order.currency,
                )
            )
            snapshot.append(
                {
                    "itemId": str(item.id),
                    "variantId": str(item.variant_id),
                    "sku": item.sku,
                    "quantityReceived": quantity,
                    "quantityReceivedTotal": order_line.quantity_received,
                    "quantityOrdered": order_line.quantity_ordered,
                    "unitCostAmount": order_line.unit_cost_amount,
                    "totalCostAmount": quantity * order_line.unit_cost_amount,
                    "movingAverageUnitCostAmount": new_cost,
                }
            )
        _check_amount(sum(line["totalCostAmount"] for line in snapshot), field="lines")
        _apply(changes, created_by=created_by)
        complete = all(line.quantity_received >= line.quantity_ordered for line in order_lines.values())
        order.status = PurchaseOrder.Status.RECEIVED if complete else PurchaseOrder.Status.PARTIALLY_RECEIVED
        order.received_at = timezone.now() if complete else order.received_at
        order.save(using=DB, update_fields=["status", "received_at", "updated_at"])
        receipt = PurchaseOrderReceipt.objects.create(purchase_order=order, receipt_id=receipt_id, lines=snapshot, created_by=created_by)
        publish(
            topics.PURCHASE_ORDER_RECEIVED.name,
            {
                "purchaseOrderId": str(order.id),
                "receiptId": receipt_id,
                "merchantId": str(order.merchant_id),
                "locationId": str(order.location_id),
                "supplier": order.supplier,
                "currency": order.currency,
                "status": order.status,
                "receivedAt": receipt.created_at,
                "totalCostAmount": sum(line["totalCostAmount"] for line in snapshot),
                "lines": snapshot,
            },
            event_type="purchase-order.received",
            key=order.id,
            using=DB,
        )
    return order
