"""The stock-change core (`_apply`, the only code that changes stock) and manual adjustments."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from apps.inventory.models import Item, Note, Operation, ReferenceType, Stock, Tracking
from apps.inventory.services.common import DB, InsufficientStock, QuantityLimitExceeded, _check_amount, _items, _location, _value
from apps.inventory.services.locations import _default_location_id
from merchant_platform import snowflake
from merchant_platform.db import copy_insert
from merchant_platform.errors import Conflict, InvalidInput
from merchant_platform.messaging import publish, topics
from merchant_platform.money import MAX_QUANTITY

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
    cost_given: bool = False  # unit_cost_amount and cost_currency stand even when None (a return at its deduction's cost)
    requested: int | None = None  # what was asked, when more than delta (default: |delta| or |reserved_delta|)
    returned_from_id: int | None = None  # a RETURN: the DEDUCT row it brings back


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
        own_cost = change.cost_given or change.unit_cost_amount is not None
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
                requested=change.requested if change.requested is not None else abs(change.delta) or abs(change.reserved_delta),
                quantity_after=on_hand,
                reserved_after=reserved,
                reference_type=change.reference_type,
                reference_id=change.reference_id,
                reference_line=change.reference_line,
                note=note,
                reason=change.reason,
                unit_cost_amount=change.unit_cost_amount if own_cost else change.item.unit_cost_amount,
                cost_currency=change.cost_currency if own_cost else change.item.cost_currency,
                created_by=created_by,
                returned_from_id=change.returned_from_id,
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
