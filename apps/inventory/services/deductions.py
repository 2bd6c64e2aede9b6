"""Deduction of paid sale orders (payment.success, spec 6.2, and a reservation's commit) and the
inventory.cogs events it publishes."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.inventory.models import Item, Location, Note, Operation, ReferenceType, Reservation, Tracking
from apps.inventory.services.common import DB, ForeignRecord, _lock_orders, _value, log
from apps.inventory.services.locations import location_ensure_default
from apps.inventory.services.stock import BLOCK, Change, _apply
from merchant_platform.errors import NotFound
from merchant_platform.messaging import publish_many, topics


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


def _by_cost_currency(tracking: list[Tracking], items: dict[int, Item]) -> dict[tuple[int, str, str], list[Tracking]]:
    """The rows that moved stock, by merchant, reference (an order, a refund) and cost currency (the
    rows' own, else their item's)."""
    groups: dict[tuple[int, str, str], list[Tracking]] = {}
    for row in tracking:
        if row.delta:
            currency = row.cost_currency or items[row.item_id].currency
            groups.setdefault((row.merchant_id, row.reference_id, currency), []).append(row)
    return groups


def _cost_line(row: Tracking, items: dict[int, Item], quantity: int) -> dict:
    """A line of an inventory.cogs or inventory.returned event: `quantity` units of the row's item."""
    return {
        "lineId": row.reference_line,
        "itemId": str(row.item_id),
        "variantId": str(items[row.item_id].variant_id),
        "locationId": str(row.location_id),
        "quantity": quantity,
        "unitCostAmount": row.unit_cost_amount,
        "costAmount": _value(quantity, row.unit_cost_amount),
    }


def _cogs_events(tracking: list[Tracking], items: dict[int, Item]) -> None:
    """One inventory.cogs event per order and cost currency (the currency of the items' unit costs,
    not the sale's), for the lines actually deducted (docs/events.md), keyed by the order; one
    INSERT into the outbox for all of them."""
    events = [
        (
            order_id,
            {
                "orderId": order_id,
                "merchantId": str(rows[0].merchant_id),
                "currency": currency,
                "totalCostAmount": sum(_value(-t.delta, t.unit_cost_amount) for t in rows),
                "lines": [_cost_line(t, items, -t.delta) for t in rows],
            },
        )
        for (_, order_id, currency), rows in _by_cost_currency(tracking, items).items()
    ]
    publish_many(topics.INVENTORY_COGS.name, events, event_type="inventory.cogs", using=DB)
