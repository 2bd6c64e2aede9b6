"""Purchase orders and their receipts: the moving-average unit cost in one currency."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from apps.inventory.models import Item, Operation, PurchaseOrder, PurchaseOrderLine, PurchaseOrderReceipt, ReferenceType, Stock
from apps.inventory.services.common import DB, MAX_LINES, QuantityLimitExceeded, _check_amount, _illegal, _items, _location, _locked, log
from apps.inventory.services.locations import _default_location_id
from apps.inventory.services.stock import Change, _apply
from merchant_platform.errors import Conflict, InvalidInput
from merchant_platform.messaging import publish, topics
from merchant_platform.money import MAX_QUANTITY


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
