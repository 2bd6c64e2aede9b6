"""Cycle counts (tickets of type CYCLE_COUNT): OPEN -> COUNTED -> APPLIED, or CANCELLED."""

from __future__ import annotations

from django.db import transaction

from apps.inventory.models import Note, Operation, ReferenceType, Stock, Ticket
from apps.inventory.services.common import DB, _illegal, _items, _location, _locked
from apps.inventory.services.locations import _default_location_id
from apps.inventory.services.stock import ALLOW, Change, _adjustment_event, _apply, _ensure_stock_rows
from merchant_platform.errors import InvalidInput


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
