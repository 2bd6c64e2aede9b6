"""Returns of refunded sale lines (payment.refunded, issue 33) and the inventory.returned events
they publish: the refunded goods come back on hand at the cost their deduction took them out at."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from apps.inventory.models import Item, Location, Note, Operation, ReferenceType, Stock, Tracking
from apps.inventory.services.common import DB, ForeignRecord, _lock_orders, _value, log
from apps.inventory.services.deductions import _by_cost_currency, _cost_line, _default_locations
from apps.inventory.services.purchase_orders import _moving_average
from apps.inventory.services.stock import Change, _apply
from merchant_platform.errors import Conflict, NotFound
from merchant_platform.messaging import publish_many, topics


class SaleLineNotDeducted(NotFound):
    """A refund line to restock names a sale line inventory never deducted for the refund's
    merchant (an unknown order or line, or another merchant's order). The deduction may still be
    on its way (payment.success is another topic), so the consumer retries it, then parks it."""

    def __init__(self, detail: str, *, extra: dict):
        super().__init__(detail, code="SALE_LINE_NOT_DEDUCTED", extra=extra)


class RefundLineMismatch(Conflict):
    """A refund line names a sale line whose deduction took another variant: no retry fixes it."""

    def __init__(self, detail: str, *, extra: dict):
        super().__init__(detail, code="REFUND_LINE_MISMATCH", extra=extra)


def stock_return_refunds(*, refunds: list[dict]) -> list[Tracking]:
    """Put the refunded goods of succeeded refunds back on hand, once per refund and line.

    Each refund: refund_id, merchant_id, order_id (the sale order: refund.sourceId), lines; each
    line: line_id, variant_id, quantity, restock, optional location_id. Only lines with restock
    true come back, each as one RETURN tracking row (reference REFUND, the refund id, the line id)
    that names the line's DEDUCT row: at location_id (the merchant's, else ForeignRecord) or else
    where the deduction took them from (the default location when that one was deleted since), at
    the deduction's unit cost. A (refund, line) already
    returned, or repeated in `refunds`, is skipped, so redeliveries do nothing. A sale line never
    returns more than its deduction took out over all its refunds: the excess is recorded with note
    RETURN_EXCEEDS_DEDUCTED (delta what was left, often 0; `requested` what was asked) and logged.
    A line without a deduction of the merchant's order is SaleLineNotDeducted and one whose
    deduction took another variant RefundLineMismatch: the whole call changes nothing then, so a
    refund is returned all at once or not at all. Returned goods enter the item's moving-average
    cost at the deduction's unit cost. Publishes one inventory.returned per refund (and cost
    currency) with restocked lines. The refunds are handled together (a consumer's batch): a fixed
    number of statements whatever their count."""
    wanted = [(refund, line) for refund in refunds for line in refund["lines"] if line["restock"]]
    if not wanted:
        return []
    with transaction.atomic(using=DB):
        # The order's lock first (a deduction of the same order waits), then items, then stock rows.
        _lock_orders([(refund["merchant_id"], refund["order_id"]) for refund, _ in wanted])
        merchant_ids = {refund["merchant_id"] for refund, _ in wanted}
        seen = set(
            Tracking.objects.filter(
                merchant_id__in=merchant_ids,
                operation=Operation.RETURN,
                reference_type=ReferenceType.REFUND,
                reference_id__in={str(refund["refund_id"]) for refund, _ in wanted},
            ).values_list("merchant_id", "reference_id", "reference_line")
        )
        todo: list[tuple[dict, dict]] = []
        for refund, line in wanted:
            key = (refund["merchant_id"], str(refund["refund_id"]), line["line_id"])
            if key not in seen:
                seen.add(key)
                todo.append((refund, line))
        if not todo:
            log.info("inventory.return_replay", refundIds=sorted({str(refund["refund_id"]) for refund, _ in wanted}))
            return []
        deductions = {
            (t.merchant_id, t.reference_id, t.reference_line): t
            for t in Tracking.objects.filter(
                merchant_id__in=merchant_ids,
                operation=Operation.DEDUCT,
                reference_type=ReferenceType.SALE_ORDER,
                reference_id__in={refund["order_id"] for refund, _ in todo},
            )
        }
        _check_deducted(todo, deductions)
        sold = [deductions[(refund["merchant_id"], refund["order_id"], line["line_id"])] for refund, line in todo]
        items = {
            item.id: item for item in Item.objects.select_for_update(no_key=True).filter(pk__in={d.item_id for d in sold}).order_by("pk")
        }
        _check_variants(todo, sold, items)
        locations = _return_locations(todo, sold)
        returned = dict(
            Tracking.objects.filter(returned_from_id__in=[d.pk for d in sold])
            .order_by()
            .values("returned_from_id")
            .annotate(total=Sum("delta"))
            .values_list("returned_from_id", "total")
        )
        on_hand = dict(
            Stock.objects.filter(item_id__in=items)
            .order_by()
            .values("item_id")
            .annotate(total=Sum("quantity_on_hand"))
            .values_list("item_id", "total")
        )
        changes, costed = [], {}
        for (refund, line), deduction, location_id in zip(todo, sold, locations, strict=True):
            item = items[deduction.item_id]
            left = max(-deduction.delta - returned.get(deduction.pk, 0), 0)
            quantity = min(line["quantity"], left)
            returned[deduction.pk] = returned.get(deduction.pk, 0) + quantity
            if _cost_in(item, on_hand.get(item.id, 0), quantity, deduction):
                costed[item.id] = item
            on_hand[item.id] = on_hand.get(item.id, 0) + quantity
            changes.append(
                Change(
                    item=item,
                    location_id=location_id,
                    operation=Operation.RETURN,
                    reference_type=ReferenceType.REFUND,
                    reference_id=str(refund["refund_id"]),
                    reference_line=line["line_id"],
                    delta=quantity,
                    requested=line["quantity"],
                    note=Note.RETURN_EXCEEDS_DEDUCTED if quantity < line["quantity"] else "",
                    reason=f"Refund {refund['refund_id']} of order {refund['order_id']}",
                    unit_cost_amount=deduction.unit_cost_amount,
                    cost_currency=deduction.cost_currency,
                    cost_given=True,
                    returned_from_id=deduction.pk,
                )
            )
        if costed:
            Item.objects.bulk_update(list(costed.values()), ["unit_cost_amount", "cost_currency", "updated_at"])
        tracking = _apply(changes)
        for row in tracking:
            if row.note == Note.RETURN_EXCEEDS_DEDUCTED:
                log.warning(
                    "inventory.return_exceeds_deducted",
                    refundId=row.reference_id,
                    lineId=row.reference_line,
                    deductionId=str(row.returned_from_id),
                    requested=row.requested,
                    returned=row.delta,
                )
        _returned_events(
            tracking, items, orders={(refund["merchant_id"], str(refund["refund_id"])): refund["order_id"] for refund, _ in todo}
        )
    return tracking


def _check_deducted(todo: list[tuple[dict, dict]], deductions: dict[tuple, Tracking]) -> None:
    missing = [
        {"refundId": str(refund["refund_id"]), "orderId": refund["order_id"], "lineId": line["line_id"]}
        for refund, line in todo
        if (refund["merchant_id"], refund["order_id"], line["line_id"]) not in deductions
    ]
    if missing:
        names = "; ".join(f"line {m['lineId']} of order {m['orderId']} (refund {m['refundId']})" for m in missing)
        raise SaleLineNotDeducted(f"No deduction of this merchant's sale line to return: {names}.", extra={"lines": missing})


def _check_variants(todo: list[tuple[dict, dict]], sold: list[Tracking], items: dict[int, Item]) -> None:
    mismatched = [
        {"refundId": str(refund["refund_id"]), "lineId": line["line_id"], "variantId": str(line["variant_id"])}
        for (refund, line), deduction in zip(todo, sold, strict=True)
        if items[deduction.item_id].variant_id != line["variant_id"]
    ]
    if mismatched:
        names = "; ".join(f"line {m['lineId']} of refund {m['refundId']} (variant {m['variantId']})" for m in mismatched)
        raise RefundLineMismatch(f"Refund lines whose sale line sold another variant: {names}.", extra={"lines": mismatched})


def _return_locations(todo: list[tuple[dict, dict]], sold: list[Tracking]) -> list[int]:
    """Where each line comes back: its location_id, which must be a live location of the refund's
    merchant (else ForeignRecord), or the location its deduction took it from while that location
    is live, else (deleted since) the merchant's default location."""
    live = dict(
        Location.objects.filter(
            pk__in={line["location_id"] for _, line in todo if line.get("location_id")} | {d.location_id for d in sold}
        ).values_list("id", "merchant_id")
    )
    closed = {
        refund["merchant_id"]
        for (refund, line), d in zip(todo, sold, strict=True)
        if not line.get("location_id") and d.location_id not in live
    }
    defaults = _default_locations(closed) if closed else {}
    locations = []
    for (refund, line), deduction in zip(todo, sold, strict=True):
        location_id = line.get("location_id")
        if location_id and live.get(location_id) != refund["merchant_id"]:
            raise ForeignRecord(
                f"Refund {refund['refund_id']} of merchant {refund['merchant_id']} names location {location_id}, "
                "which is not this merchant's (another merchant's or none).",
                extra={"locationId": str(location_id)},
            )
        locations.append(location_id or (deduction.location_id if deduction.location_id in live else defaults[refund["merchant_id"]]))
    return locations


def _cost_in(item: Item, on_hand: int, quantity: int, deduction: Tracking) -> bool:
    """Bring `quantity` returned units into the item's moving-average cost at the deduction's unit
    cost, as a receipt at that cost would (the stock gone or no cost yet: the cost starts afresh).
    A deduction without cost changes nothing; nor does one in another currency than the item's
    cost while units are on hand (the average never mixes currencies). True when the item changed."""
    cost, currency = deduction.unit_cost_amount, deduction.cost_currency
    if not quantity or cost is None:
        return False
    fresh = item.unit_cost_amount is None or on_hand <= 0
    if not fresh and item.cost_currency not in ("", currency):
        log.warning(
            "inventory.return_cost_currency_differs",
            itemId=str(item.id),
            costCurrency=item.cost_currency,
            deductionCurrency=currency,
            deductionId=str(deduction.pk),
        )
        return False
    new_cost = _moving_average(on_hand, item.unit_cost_amount, quantity, cost)
    new_currency = currency or item.cost_currency
    if (new_cost, new_currency) == (item.unit_cost_amount, item.cost_currency):
        return False
    item.unit_cost_amount, item.cost_currency, item.updated_at = new_cost, new_currency, timezone.now()
    return True


def _returned_events(tracking: list[Tracking], items: dict[int, Item], *, orders: dict[tuple[int, str], str]) -> None:
    """One inventory.returned per refund and cost currency (the DEDUCT rows' cost currency, the
    one inventory.cogs posted in), for the lines actually restocked, keyed by the refund; one
    INSERT into the outbox for all of them."""
    events = [
        (
            refund_id,
            {
                "refundId": refund_id,
                "orderId": orders[(merchant_id, refund_id)],
                "merchantId": str(merchant_id),
                "currency": currency,
                "totalCostAmount": sum(_value(t.delta, t.unit_cost_amount) for t in rows),
                "lines": [{**_cost_line(t, items, t.delta), "trackingId": str(t.id)} for t in rows],
            },
        )
        for (merchant_id, refund_id, currency), rows in _by_cost_currency(tracking, items).items()
    ]
    publish_many(topics.INVENTORY_RETURNED.name, events, event_type="inventory.returned", using=DB)
